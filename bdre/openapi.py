"""Completes the generated OpenAPI schema: each operation in the group of its resource with
a summary, and with the error answers it can give, so that a reader finds the operations by
resource and a client (or a fuzzer) each status code and its body described."""

from __future__ import annotations

import re

from django.db import models
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance, get_doc

# The API's resources as the docs group them: a path's first segment after /api/v1/, some
# merged with the resource they belong to (a run's logs are the runs', the archive is the
# queue's consumed rows).
RESOURCE_TAGS = {
    "applications": "applications",
    "processes": "processes",
    "templates": "templates",
    "properties": "properties",
    "runs": "runs",
    "logs": "runs",
    "operations": "operations",
    "batches": "batches",
    "queue": "queue",
    "archive": "queue",
    "files": "files",
    "tables": "tables",
    "table-shares": "tables",
    "servers": "servers",
    "lineage": "lineage",
    "alerts": "alerts",
    "alert-destinations": "alerts",
    "teams": "teams",
    "memberships": "teams",
    "invitations": "teams",
    "tokens": "tokens",
    "auth": "tokens",
    "master": "master tables",
}
TAG_DESCRIPTIONS = {
    "applications": "The applications (bus domains) a team's jobs belong to.",
    "processes": "Jobs and their steps: registration, runs, pauses, schedules, replays.",
    "templates": "Job templates and their instantiation.",
    "properties": "Jobs' and steps' properties, by config group.",
    "runs": "Runs of jobs and steps, with their logs.",
    "operations": "Backfills, rewinds, reprocesses and catch-ups, with their progress.",
    "batches": "Batches, with their provenance, and reprocessing a batch.",
    "queue": "The batch queue: waiting, failed and dead-lettered rows, and consumed ones.",
    "files": "Registered files, and reprocessing a file.",
    "tables": "The tables steps write, and their shares with other teams.",
    "servers": "Storage and database grants of a team.",
    "lineage": "Queries, column-level lineage nodes and relations, and their graphs.",
    "alerts": "Alert destinations and the alerts sent.",
    "teams": "Teams, their members' roles, and invitations to join them.",
    "tokens": "API tokens: issuing, listing, revoking.",
    "master tables": "The fixed lists of types and states.",
}
# Summaries of the standard operations of a resource, by viewset action.
ACTION_SUMMARIES = {
    "list": "List {plural}",
    "retrieve": "Get one {singular}",
    "create": "Create {article} {singular}",
    "update": "Replace {article} {singular}",
    "partial_update": "Change some fields of {article} {singular}",
    "destroy": "Delete {article} {singular}",
}
SUMMARY_LENGTH = 100
SUMMARY_SHORT = 60


class BdreAutoSchema(AutoSchema):
    """Operations grouped by resource, each with a summary: the one ``extend_schema`` gives,
    else the standard action's, the first sentence of the operation's own docstring, or its
    name with the resource's."""

    def get_tags(self) -> list[str]:
        words = self._resource_path()
        return [RESOURCE_TAGS.get(words[0], words[0]) if words else "other"]

    def get_summary(self) -> str | None:
        singular, plural = self._names()
        action = getattr(self.view, "action", None)
        if action in ACTION_SUMMARIES:
            article = "an" if singular[:1] in "aeiou" else "a"
            return ACTION_SUMMARIES[action].format(
                singular=singular, plural=plural, article=article
            )
        if action:  # an extra action of a viewset: the viewset's docstring is not about it
            description = self.get_description()
            if description == get_doc(type(self.view)):
                description = ""
            own = _first_sentence(description)
            return own or f"{action.replace('_', ' ').capitalize()} ({singular})"
        handler = getattr(self.view, self.method.lower(), None)
        doc = get_doc(handler) or get_doc(type(self.view))
        return _first_sentence(doc) or f"{self.method} {singular}"

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        responses = operation.setdefault("responses", {})
        # The errors its shape gives, and those the view declared in extend_schema.
        errors = ErrorRules(self, operation).errors()
        for status, description in errors.items():
            responses.setdefault(status, {"description": description})
        for status, answer in responses.items():
            if status in BODIES:
                # Whatever a view gave as body, the answer is one of these shapes.
                answer["content"] = {"application/json": {"schema": BODIES[status]}}
                if not answer.get("description"):
                    answer["description"] = errors.get(status) or DESCRIPTIONS[status]
        return operation

    def _resource_path(self) -> list[str]:
        """The path's words after /api/v1/ naming the resource: not the parameters, not an
        extra action's own words."""
        words = self._tokenize_path()
        words = words[1:] if words[:1] == ["v1"] else words
        handler = getattr(self.view, getattr(self.view, "action", None) or "", None)
        url_path = getattr(handler, "url_path", "")
        if url_path and words[-len(url_path.split("/")) :] == url_path.split("/"):
            words = words[: -len(url_path.split("/"))]
        return [w for w in words if not w.startswith("{")]

    def _names(self) -> tuple[str, str]:
        """The resource as one and as many rows (``lineage node``, ``lineage nodes``)."""
        words = [w for w in self._resource_path() if w != "master"]
        if not words:
            return "resource", "resources"
        plural = " ".join(words).replace("-", " ")
        if words[-1] in SINGULAR_NAMES:
            single = SINGULAR_NAMES[words[-1]]
            return " ".join([*words[:-1], single]).replace("-", " "), f"{single}s"
        return _singular(plural), plural


# Resources whose path is not a plural of rows.
SINGULAR_NAMES = {"queue": "queue row", "archive": "consumed queue row"}


def _singular(plural: str) -> str:
    for ending, replacement in (("ies", "y"), ("sses", "ss"), ("uses", "us"), ("ches", "ch")):
        if plural.endswith(ending):
            return plural.removesuffix(ending) + replacement
    return plural.removesuffix("s")


def _first_sentence(text: str) -> str:
    """A summary from a docstring: its first sentence, at most ``SUMMARY_LENGTH`` long."""
    paragraph = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0].replace("``", "")
    sentence = re.split(r"(?<=\.)\s", " ".join(paragraph.split()), maxsplit=1)[0]
    if len(sentence) > SUMMARY_SHORT:
        # A long sentence keeps its main clause: what comes before a colon, semicolon or
        # parenthesis, when that says enough.
        cuts = [m.start() for m in re.finditer(r": |; | \(|, the ", sentence) if m.start() >= 25]
        sentence = sentence[: cuts[0]] if cuts else sentence
    sentence = sentence.rstrip(".")
    if len(sentence) > SUMMARY_LENGTH:
        sentence = sentence[: SUMMARY_LENGTH - 1].rsplit(" ", 1)[0] + "…"
    return sentence


# --- The error answers of each operation -------------------------------------------------
# Each operation lists the errors it can give and no other, so that a client knows which
# to handle and the fuzzer (tests/bdre/test_openapi.py) fails on an undocumented one. Most
# follow from the operation's shape (ErrorRules); a view declares the rest where they
# arise, in its ``extend_schema(responses=...)`` (a lifecycle action's 409s, a body naming a
# row that is then not found), and its description is kept.

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
# bdre.api.ErrorSerializer's component, for a schema where no view names it.
LIFECYCLE_ERROR = {
    "type": "object",
    "description": "A rule of the lifecycle broken: its BDRE code (bdre/errors.py) and message.",
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
    "required": ["code", "message"],
}
LIFECYCLE = {"$ref": "#/components/schemas/Error"}
DETAIL_REF = {"$ref": "#/components/schemas/Detail"}

# The body of each error status: what bdre.api.exception_handler answers.
BODIES = {
    "400": {"anyOf": [LIFECYCLE, {"$ref": "#/components/schemas/FieldErrors"}]},
    "401": DETAIL_REF,
    "403": DETAIL_REF,
    "404": {"anyOf": [LIFECYCLE, DETAIL_REF]},
    "409": {"anyOf": [LIFECYCLE, DETAIL_REF]},
    "413": DETAIL_REF,
    "415": DETAIL_REF,
    "429": DETAIL_REF,
}
# For an error a view declares without saying why.
DESCRIPTIONS = {
    "400": "Invalid input.",
    "401": "Not signed in, or the token is unknown or expired.",
    "403": "The role in the owning team is too low.",
    "404": "Not found, or of a team the user is not in.",
    "409": "The current state forbids it.",
    "413": "The body is larger than the server accepts.",
    "415": "The body's media type is not one the operation reads.",
    "429": "Throttled: the Retry-After header says for how many seconds.",
}
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
# Query parameters that never make a 400: a page out of range is a 404, an unknown
# ordering is ignored.
LENIENT_QUERY = {"page", "ordering"}


class ErrorRules:
    """The errors an operation can give, from its shape, each with why:

    - 401 whenever the view authenticates (a missing, unknown or expired token);
    - 403 for a write of such a view: the role in the owning team, or a session's CSRF token;
    - 400 for a body (unreadable or invalid) or a query parameter that is validated;
    - 413 and 415 for a body: too large, or of a media type not read;
    - 404 for a path naming a row, or a page past the last of a list;
    - 409 for a create or change of a row with a unique key beyond its id (a race past the
      validation is answered 409), or a delete of a row that other rows hold (PROTECT);
    - 429 always: every view is throttled (BDRE_THROTTLE_*; a locked-out address as well).
    """

    def __init__(self, schema: BdreAutoSchema, operation: dict) -> None:
        self.schema = schema
        self.method = schema.method
        self.view = schema.view
        self.body = "requestBody" in operation
        parameters = operation.get("parameters", [])
        self.query = [p["name"] for p in parameters if p["in"] == "query"]
        self.detail = any(p["in"] == "path" for p in parameters)

    def errors(self) -> dict[str, str]:
        singular, _ = self.schema._names()
        errors: dict[str, str] = {}
        authenticated = bool(getattr(self.view, "authentication_classes", ()))
        if authenticated:
            errors["401"] = DESCRIPTIONS["401"]
            if self.method in WRITES:
                errors["403"] = (
                    "The role in the owning team is too low (or, signed in by a session, the "
                    "CSRF token is missing)."
                )
        validated = [name for name in self.query if name not in LENIENT_QUERY]
        if self.body:
            errors["400"] = "Invalid input: the body names each field at fault."
            errors["413"] = DESCRIPTIONS["413"]
            errors["415"] = (
                "The body's media type is not one the operation reads, or it could not be read."
            )
        elif validated:
            errors["400"] = f"A query parameter's value is invalid ({', '.join(validated)})."
        if self.detail:
            errors["404"] = f"No such {singular}, or it is of a team the user is not in."
        elif "page" in self.query:
            errors["404"] = "No such page: past the last one, or not a page number."
        conflict = self._conflict()
        if conflict:
            errors["409"] = conflict
        errors["429"] = (
            "Throttled (BDRE_THROTTLE_*), or locked out after failed log-ins or tokens; the "
            "Retry-After header says for how many seconds."
        )
        return errors

    def _conflict(self) -> str:
        action = getattr(self.view, "action", None)
        if action in {"create", "update", "partial_update"}:
            # A unique key the client writes: the validation checks it, but two requests
            # taking the same name at once both pass, and the second is answered 409.
            serializer = force_instance(self.schema.get_request_serializer())
            writable = {
                field.source
                for field in getattr(serializer, "fields", {}).values()
                if not field.read_only
            }
            model = _model_of(serializer)
            if model is not None and _unique_keys(model) & writable:
                return (
                    "Another request took the same name or key at the same time: read it "
                    "again and retry."
                )
        if action == "destroy":
            get_class = getattr(self.view, "get_serializer_class", None)
            model = _model_of(get_class()) if get_class else None
            if model is not None and _held(model, set()):
                return "Still in use by other rows: remove those first."
        return ""


def _model_of(serializer) -> type[models.Model] | None:
    return getattr(getattr(serializer, "Meta", None), "model", None)


def _unique_keys(model: type[models.Model]) -> set[str]:
    """The fields of the model's unique keys, its id aside."""
    meta = model._meta
    keys = {field.name for field in meta.concrete_fields if field.unique and not field.primary_key}
    for together in meta.unique_together:
        keys.update(together)
    for constraint in meta.constraints:
        if isinstance(constraint, models.UniqueConstraint):
            keys.update(constraint.fields)
    return keys


def _held(model: type[models.Model], seen: set) -> bool:
    """Whether deleting a row of ``model`` can meet a PROTECT or RESTRICT: on its own
    relations or on those of the rows its delete cascades to."""
    seen.add(model)
    for relation in model._meta.related_objects:
        on_delete = getattr(relation, "on_delete", None)
        if on_delete in (models.PROTECT, models.RESTRICT):
            return True
        related = relation.related_model
        if on_delete is models.CASCADE and related not in seen and _held(related, seen):
            return True
    return False


def add_error_answers(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: the error bodies' components and the groups."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Detail", DETAIL)
    schemas.setdefault("FieldErrors", FIELD_ERRORS)
    schemas.setdefault("Error", LIFECYCLE_ERROR)
    used = {
        tag
        for operations in result.get("paths", {}).values()
        for operation in operations.values()
        for tag in operation.get("tags", [])
    }
    # The groups in the docs' order, each said in a line.
    result["tags"] = [
        {"name": name, "description": TAG_DESCRIPTIONS.get(name, "")} for name in sorted(used)
    ]
    return result
