"""Completes the generated OpenAPI schema: each operation in the group of its resource with
a summary, and with the error answers it can give, so that a reader finds the operations by
resource and a client (or a fuzzer) each status code and its body described."""

from __future__ import annotations

import re

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_doc

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
    "batches": "Batches, with their provenance, and reprocessing a batch.",
    "queue": "The batch queue: waiting, failed and dead-lettered rows, and consumed ones.",
    "files": "Registered files, and reprocessing a file.",
    "tables": "The tables steps write, and their shares with other teams.",
    "servers": "Storage and database grants of a team.",
    "lineage": "Queries, column-level lineage nodes and relations, and their graphs.",
    "alerts": "Alert destinations and the alerts sent.",
    "teams": "Teams and their members' roles.",
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


def can_answer(status: str, path: str, method: str) -> bool:
    """Whether the operation can give that error: a read changes nothing, so it meets no
    conflict; only a body is too large or of a media type not read; the log-in paths take
    no credentials to refuse. (A documented operation is never a 405: not listed.)"""
    if status == "401":
        return not path.startswith("/api/v1/auth/")
    if status in ("413", "415"):
        return method in {"post", "put", "patch"}
    if status == "409":
        return method != "get"
    return True


def add_error_answers(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Detail", DETAIL)
    schemas.setdefault("FieldErrors", FIELD_ERRORS)
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
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for status, (text, schema) in ANSWERS.items():
                if not can_answer(status, path, method):
                    responses.pop(status, None)
                    continue
                answer = responses.setdefault(str(status), {"description": text})
                # Keep the description a view gave; the body is always one of these shapes.
                answer["content"] = {"application/json": {"schema": schema}}
    return result
