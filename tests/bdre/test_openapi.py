"""The OpenAPI schema and its docs, and a schemathesis run over every operation of the schema
as a developer of a team: no server error, and every answer keeps to the schema (status code,
content type and body). The run is bounded and repeatable: ``BDRE_FUZZ_EXAMPLES`` cases an
operation (8, about a minute; 100 for a deeper run) drawn from a fixed seed."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.contrib.auth.models import Group
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState, File
from bdre.api_urls import MASTER_TABLES
from bdre.models import Membership
from lineage.extract import extract, record
from lineage.models import LineageNode, LineageQuery, LineageRelation
from processes import orchestrator, registry, schedules
from processes.models import (
    BusDomain,
    InstanceExec,
    Process,
    ProcessLog,
    ProcessTemplate,
    Property,
    Server,
)
from tests.helpers.api import api_as
from tests.helpers.factories import (
    FileFactory,
    JobFactory,
    LineageQueryFactory,
    QueueRowFactory,
    ServerFactory,
    StepFactory,
)
from tests.helpers.jobs import build_job, callable_step

EXAMPLES = int(os.environ.get("BDRE_FUZZ_EXAMPLES", "8"))


def test_the_schema_is_served_and_names_every_resource(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for resource in (
        "applications",
        "processes",
        "templates",
        "properties",
        "runs",
        "batches",
        "queue",
        "archive",
        "files",
        "servers",
        "teams",
        "memberships",
        "master/process-types",
    ):
        assert f"/api/v1/{resource}/" in paths
    init_job = paths["/api/v1/processes/{id}/init-job/"]["post"]["responses"]
    assert init_job["201"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "InitJobResult"
    )
    assert set(init_job) >= {"400", "401", "403", "404", "409"}


def test_the_docs_are_served_without_any_cdn(client, db):
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html
    assert "cdn" not in html.lower() and "https://" not in html
    bundle = next(part for part in html.split('"') if part.endswith("swagger-ui-bundle.js"))
    assert client.get(bundle).status_code == 200


def _load_schema():
    from bdre.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/schema/", application)


schema = _load_schema()

# The ids of the rows in the fuzzed user's world, per resource: filled by the `world` fixture
# before any case is generated, read when an id is drawn.
REAL_IDS: dict[str, list[int]] = {}
ID_MODELS = {
    "applications": BusDomain,
    "processes": Process,
    "templates": ProcessTemplate,
    "properties": Property,
    "runs": InstanceExec,
    "logs": ProcessLog,
    "batches": Batch,
    "queue": BatchConsumpQueue,
    "archive": ArchiveConsumpQueue,
    "files": File,
    "servers": Server,
    "lineage/queries": LineageQuery,
    "lineage/nodes": LineageNode,
    "lineage/relations": LineageRelation,
    "teams": Group,
    "memberships": Membership,
    **{f"master/{prefix}": model for prefix, model in MASTER_TABLES.items()},
    "graph/table": LineageNode,
    "graph/column": LineageNode,
    "graph/process": Process,
    "graph/batch": Batch,
}


def _resource(path: str, parameters: dict) -> str:
    if "{kind}" in path:
        return f"graph/{parameters.get('kind')}"
    return path.removeprefix("/api/v1/").split("/{id}")[0]


def _real(resource: str, index: int) -> int:
    ids = REAL_IDS.get(resource) or [0]
    return ids[index % len(ids)]


@schema.hook
def flatmap_path_parameters(context, parameters):
    """Half of the ids name a real row: an id drawn at random hardly ever does, and the
    fuzzer would never get past the 404 into the operation."""
    path = context.operation.path
    if "{id}" not in path or not isinstance(parameters, dict):
        return st.just(parameters)
    real = st.integers(min_value=0, max_value=10_000).map(
        lambda index: {**parameters, "id": _real(_resource(path, parameters), index)}
    )
    return st.one_of(st.just(parameters), real)


@pytest.fixture
def connection_kept(db):
    # As Django's test client does: a request must not close the test's connection (with
    # SQLite in memory that would drop the test database).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def world(team, connection_kept):
    """A developer's token, and a team that owns a little of everything the API serves: a
    job that ran (runs, logs, batches), a job downstream of it that consumed one of its
    batches (archive rows) and has another queued, schedules (timed and on upstream only),
    a template, a file, a server and the lineage of a query; and a job of another team."""
    sleep = "tests.processes.callables.sleep"
    steps = [callable_step(name, sleep) for name in ("clicks_load", "clicks_report")]
    clicks = build_job(team, "clicks", steps)
    sessions = build_job(
        team, "sessions", [callable_step("sessions_build", sleep, upstream=[clicks])]
    )
    outcome = orchestrator.run_job(clicks.pk)
    orchestrator.run_job(sessions.pk)  # consumes the batch of clicks: archive rows
    orchestrator.run_job(clicks.pk)  # and queues another for sessions
    ProcessLog.objects.create(
        process=clicks, instance_exec_id=outcome.instance_exec_id, message="started"
    )
    schedules.set_schedule(clicks.pk, schedules.Schedule(every_seconds=600))
    schedules.set_schedule(
        JobFactory(bus_domain=team.application).pk, schedules.Schedule(on_upstream=True)
    )
    registry.template_from_job(clicks, name="clicks_template")
    load = clicks.steps.get(name="clicks_load")
    QueueRowFactory(process=load, batch_state_id=BatchState.DISCARDED)
    FileFactory(batch_id=outcome.target_batch_id)
    ServerFactory(team=team.group)
    query = LineageQueryFactory(process=load)
    record(
        query,
        extract(
            "SELECT a, SUM(b) AS total FROM lake.src GROUP BY a",
            schema={"lake": {"src": {"a": "int", "b": "int"}}},
            target="lake.out",
        ),
    )
    StepFactory(parent=JobFactory(bus_domain=team.other_application))
    for resource, model in ID_MODELS.items():
        REAL_IDS[resource] = list(
            model._default_manager.order_by("pk").values_list("pk", flat=True)
        )
    yield api_as(team.developer)._credentials["HTTP_AUTHORIZATION"]
    REAL_IDS.clear()


# backends: what the fuzzer sends (NUL bytes, huge numbers, odd text) is what one database
# stores and another refuses (docs/testing.md).
@pytest.mark.backends
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same cases on every run: a failure here is never a fluke
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
    database=None,
)
def test_fuzzing_the_api_finds_no_server_error_and_no_answer_outside_the_schema(case, world):
    case.call_and_validate(
        headers={"Authorization": world},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )


@pytest.mark.parametrize("cookie", ["abc\x00def12345", "ÿÿÿÿÿÿÿÿÿÿ", "x" * 5000])
def test_a_malformed_session_cookie_is_ignored(client, team, cookie):
    client.cookies["sessionid"] = cookie
    assert client.get("/api/v1/processes/").status_code == 401


@pytest.mark.parametrize("key", ["abc\x00def", "z" * 40, ""])
def test_a_malformed_token_is_refused(team, key):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/processes/").status_code == 401


def test_a_body_past_the_upload_limit_is_a_json_413(team, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    answer = api_as(team.developer).post(
        "/api/v1/processes/pipeline/", {"name": "x" * 2000}, format="json"
    )
    assert answer.status_code == 413
    assert answer.json() == {"detail": "The body is larger than 1000 bytes."}


@pytest.mark.parametrize("content_type", ["text/plain", ""])
def test_a_body_of_a_media_type_not_read_is_a_documented_json_415(client, team, content_type):
    # The fuzzer found one (a multipart body DRF read as media type ""); it was undocumented.
    answer = api_as(team.developer).generic(
        "POST", "/api/v1/processes/", b"name=x", content_type=content_type
    )
    assert answer.status_code == 415
    assert set(answer.json()) == {"detail"}
    paths = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    assert "415" in paths["/api/v1/processes/"]["post"]["responses"]
    assert "415" not in paths["/api/v1/processes/"]["get"]["responses"]


def _operations(client) -> tuple[dict, list[tuple[str, str, dict]]]:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    return schema, [
        (path, method, operation)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    ]


def test_every_operation_is_grouped_by_its_resource_and_has_a_summary(client, db):
    schema, operations = _operations(client)
    declared = {tag["name"]: tag["description"] for tag in schema["tags"]}
    assert {"processes", "runs", "batches", "queue", "files", "lineage", "teams", "alerts"} <= set(
        declared
    )
    assert all(declared.values()), "each group is said in a line"
    for path, method, operation in operations:
        assert len(operation["tags"]) == 1 and operation["tags"][0] in declared, (path, method)
        assert operation.get("summary", "").strip(), (path, method)
        assert len(operation["summary"]) <= 100, (path, method)
    by_path = {(path, method): operation for path, method, operation in operations}
    assert by_path[("/api/v1/logs/", "get")]["tags"] == ["runs"]
    assert by_path[("/api/v1/archive/", "get")]["tags"] == ["queue"]
    assert by_path[("/api/v1/lineage/nodes/", "get")]["summary"] == "List lineage nodes"
    assert by_path[("/api/v1/batches/{id}/", "get")]["summary"] == "Get one batch"
    # extend_schema's own summary is kept
    assert by_path[("/api/v1/processes/{id}/rewind/", "post")]["summary"].startswith(
        "Rewind a step"
    )


def test_each_operation_lists_only_the_errors_its_shape_gives(client, db):
    _, operations = _operations(client)
    for path, method, operation in operations:
        errors = {status for status in operation["responses"] if status[0] in "45"}
        where = (method, path, sorted(errors))
        query = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        detail = "{" in path
        assert "405" not in errors, where  # the method is the operation's own
        assert errors <= {"400", "401", "403", "404", "409", "413", "415", "429"}, where
        assert "429" in errors, where  # every view is throttled
        assert ("401" in errors) != path.startswith("/api/v1/auth/"), where
        if method == "get":
            # a read changes nothing (no conflict), takes no body, and a signed-in user may
            # read whatever he sees (no 403)
            assert not errors & {"403", "409", "413", "415"}, where
            if not query - {"page", "ordering"}:
                assert "400" not in errors, where  # no filter to get wrong
            if not detail and "page" not in query:
                assert "404" not in errors, where
        if "requestBody" in operation:
            assert {"400", "413", "415"} <= errors, where
        else:
            assert not errors & {"413", "415"}, where
        if detail:
            assert "404" in errors, where
        for status in errors:
            answer = operation["responses"][status]
            assert answer["description"].strip(), (where, status)
            assert answer["content"]["application/json"]["schema"], (where, status)


def test_an_operation_lists_the_errors_its_service_can_raise(client, db):
    _, operations = _operations(client)
    by_path = {(path, method): operation for path, method, operation in operations}

    def errors(path: str, method: str) -> set[str]:
        responses = by_path[(path, method)]["responses"]
        return {status for status in responses if status[0] == "4"}

    # a list: a filter's value can be invalid, a page past the last is not found
    assert errors("/api/v1/processes/", "get") == {"400", "401", "404", "429"}
    # nothing to filter: no 400, and not in pages: no 404
    assert errors("/api/v1/master/process-types/", "get") == {"401", "429"}
    assert errors("/api/v1/processes/{id}/", "get") == {"401", "404", "429"}
    # a create of a name unique in its application: a race is a 409
    assert errors("/api/v1/applications/", "post") == {
        *("400", "401", "403", "409", "413", "415", "429")
    }
    assert errors("/api/v1/templates/", "post") == {"400", "401", "403", "413", "415", "429"}
    # run: a run going (104), nothing new (112, 109), a paused job (116)
    assert "409" in errors("/api/v1/processes/{id}/run/", "post")
    assert "409" in errors("/api/v1/runs/{id}/heartbeat/", "post")
    # a delete of a job that runs or is consumed (Conflict); of a server that files are on
    assert "409" in errors("/api/v1/processes/{id}/", "delete")
    assert "400" not in errors("/api/v1/processes/{id}/", "delete")
    # a delete of nothing other rows hold
    assert errors("/api/v1/tokens/{id}/", "delete") == {"401", "403", "404", "429"}
    # a team keeps an admin
    assert "400" in errors("/api/v1/memberships/{id}/", "delete")
    # issuing a token: no credentials to refuse, no row to find, throttled and locked out
    assert errors("/api/v1/auth/token/", "post") == {"400", "413", "415", "429"}
    run = by_path[("/api/v1/processes/{id}/run/", "post")]["responses"]["409"]
    body = run["content"]["application/json"]["schema"]
    assert {"$ref": "#/components/schemas/Error"} in body["anyOf"]


UNKNOWN_ID = 999_999_999


def _url(path: str, *, unknown: bool = False) -> str:
    kind = "table" if "{kind}" in path else ""
    resource = _resource(path, {"kind": kind})
    ident = UNKNOWN_ID if unknown else _real(resource, 0)
    return path.replace("{kind}", kind).replace("{id}", str(ident))


def _probes(path: str, operation: dict) -> list[tuple[str, bool, str, bytes | None]]:
    """How a client gets an operation wrong: (probe, with credentials, url, JSON body)."""
    query = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
    url = _url(path)
    probes = [("no credentials", False, url, None), ("an empty body", True, url, b"{}")]
    if "{id}" in path:
        probes.append(("an unknown id", True, _url(path, unknown=True), b"{}"))
    if "requestBody" in operation:
        probes.append(("an unreadable body", True, url, b"{not json"))
    if "page" in query:
        probes.append(("a page past the last", True, f"{url}?page={UNKNOWN_ID}", None))
    return probes


@pytest.mark.parametrize("role", ["developer", "admin"])
def test_every_operation_answers_only_errors_it_lists(world, team, role):
    """Each operation probed as a client gets it wrong: without credentials, on an unknown
    id, with an unreadable body, an empty body, a page past the last. Every error answered
    is one the schema lists for it."""
    from rest_framework.test import APIClient

    clients = {True: api_as(getattr(team, role)), False: APIClient()}
    schema = clients[True].get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operations = [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]
    # The deletes last: the other operations probe the rows first.
    operations.sort(key=lambda each: each[1] == "delete")
    unlisted, seen = [], set()
    for path, method, operation in operations:
        for probe, signed_in, url, body in _probes(path, operation):
            kwargs = {"content_type": "application/json"} if body is not None else {}
            answer = clients[signed_in].generic(method.upper(), url, body or b"", **kwargs)
            status = str(answer.status_code)
            seen.add((probe, status))
            if status[0] == "4" and status not in operation["responses"]:
                unlisted.append((method, path, probe, status, answer.content[:120]))
    assert not unlisted, unlisted
    # The probes reached each kind of error: they test what they say.
    assert {
        ("no credentials", "401"),
        ("an unknown id", "404"),
        ("an unreadable body", "400"),
        ("an empty body", "400"),
        ("an empty body", "409"),
        ("a page past the last", "404"),
    } <= seen
