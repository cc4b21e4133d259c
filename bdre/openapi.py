"""Completes the generated OpenAPI schema with the error answers every endpoint can give,
so that a client (or a fuzzer) finds each status code and its body described."""

from __future__ import annotations

DETAIL = {
    "type": "object",
    "description": "An error with a message: authentication, permission, not found, conflict.",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
FIELD_ERRORS = {
    "type": "object",
    "description": "Invalid input: each field at fault (or non_field_errors, detail) with its "
    "messages; nested bodies nest the same way.",
    "additionalProperties": True,
}
LIFECYCLE = {"$ref": "#/components/schemas/Error"}

ANSWERS = {
    "400": ("Invalid input.", {"anyOf": [LIFECYCLE, {"$ref": "#/components/schemas/FieldErrors"}]}),
    "401": ("Not signed in.", {"$ref": "#/components/schemas/Detail"}),
    "403": ("The role in the owning team is too low.", {"$ref": "#/components/schemas/Detail"}),
    "404": (
        "Not found, or owned by a team the user is not in.",
        {"anyOf": [LIFECYCLE, {"$ref": "#/components/schemas/Detail"}]},
    ),
    "405": ("Method not allowed.", {"$ref": "#/components/schemas/Detail"}),
    "413": ("The body is larger than the server accepts.", {"$ref": "#/components/schemas/Detail"}),
    "415": (
        "The body's media type is not one the operation reads, or it could not be read.",
        {"$ref": "#/components/schemas/Detail"},
    ),
    "409": (
        "The current state forbids it.",
        {"anyOf": [LIFECYCLE, {"$ref": "#/components/schemas/Detail"}]},
    ),
    "429": (
        "Throttled (BDRE_THROTTLE_*), or locked out after failed log-ins or tokens; the "
        "Retry-After header says for how many seconds.",
        {"$ref": "#/components/schemas/Detail"},
    ),
}


def add_error_answers(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Detail", DETAIL)
    schemas.setdefault("FieldErrors", FIELD_ERRORS)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for status, (text, schema) in ANSWERS.items():
                if status == "401" and path.startswith("/api/v1/auth/"):
                    continue
                if status in ("413", "415") and method not in {"post", "put", "patch"}:
                    continue
                answer = responses.setdefault(str(status), {"description": text})
                # Keep the description a view gave; the body is always one of these shapes.
                answer["content"] = {"application/json": {"schema": schema}}
    return result
