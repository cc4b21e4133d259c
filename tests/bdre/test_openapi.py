"""The OpenAPI schema and its docs, and the errors each operation lists: every one its shape
and its service can give, and only those (the fuzzer's run is test_openapi_fuzz.py)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.helpers.api import api_as
from tests.helpers.api_world import REAL_IDS, build_world, real_id, resource_of


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


def test_every_reader_gets_one_schema_generated_once(team, monkeypatch):
    """The schema is the code's, not the reader's: anonymous, each role and an outsider get
    the same one, generated on the first request of a process and served from then on."""
    from drf_spectacular.generators import SchemaGenerator
    from rest_framework.test import APIClient

    from bdre import schema_view

    schema_view.forget_schemas()
    generated = []
    original = SchemaGenerator.get_schema

    def counted(self, *args, **kwargs):
        generated.append(kwargs.get("public"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    readers = [APIClient()] + [
        api_as(getattr(team, role)) for role in ("viewer", "developer", "admin", "outsider")
    ]
    answers = [r.get("/api/schema/", HTTP_ACCEPT="application/json") for r in readers]
    assert [a.status_code for a in answers] == [200] * 5
    assert all(a.json() == answers[0].json() for a in answers)
    assert generated == [True]
    # Another format of the same schema is rendered, not generated again.
    yaml = readers[1].get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert yaml.content.startswith(b"openapi: 3") and generated == [True]
    # A language or version the site does not have is generated, never kept.
    for lang in ("zz1", "zz2"):
        assert readers[0].get(f"/api/schema/?lang={lang}").status_code == 200
    assert set(schema_view._schemas) == {(None, "en-us")}
    # Settings the schema is generated from may change under a test: any change forgets it.
    with override_settings(USE_THOUSAND_SEPARATOR=True):
        again = readers[1].get("/api/schema/", HTTP_ACCEPT="application/json")
    assert again.json() == answers[0].json() and generated == [True, True, True, True]


def test_each_format_is_rendered_once_and_served_as_rendered(team, monkeypatch):
    from drf_spectacular.renderers import OpenApiJsonRenderer, OpenApiYamlRenderer

    from bdre import schema_view

    schema_view.forget_schemas()
    rendered = []
    for renderer in (OpenApiJsonRenderer, OpenApiYamlRenderer):
        original = renderer.render

        def counted(self, data, media_type=None, context=None, _original=original):
            rendered.append(media_type)
            return _original(self, data, media_type, context)

        monkeypatch.setattr(renderer, "render", counted)
    reader = api_as(team.viewer)
    yaml, json = "application/vnd.oai.openapi", "application/vnd.oai.openapi+json"

    answers = [reader.get("/api/schema/", HTTP_ACCEPT=accept) for accept in (yaml, json) * 2]
    assert [a["Content-Type"] for a in answers] == [
        "application/vnd.oai.openapi; charset=utf-8",
        "application/vnd.oai.openapi+json",
    ] * 2
    assert answers[0].content == answers[2].content and answers[0].content.startswith(b"openapi")
    assert answers[1].json() == answers[3].json()
    assert rendered == [yaml, json]
    # A media type with parameters is rendered for its reader (as asked), and not kept.
    for _ in range(2):
        indented = reader.get("/api/schema/", HTTP_ACCEPT=f"{json}; indent=2")
        assert indented.content.startswith(b'{\n  "openapi"')
    assert rendered == [yaml, json, f"{json}; indent=2", f"{json}; indent=2"]
    assert len(schema_view._rendered) == 2


def test_the_docs_are_served_without_any_cdn(client, db):
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html
    assert "cdn" not in html.lower() and "https://" not in html
    bundle = next(part for part in html.split('"') if part.endswith("swagger-ui-bundle.js"))
    assert client.get(bundle).status_code == 200
    # A way back to the app, and the app's icon.
    assert '<a href="/">← BDRE: back to the dashboard</a>' in html
    assert 'rel="icon" href="/static/bdre/favicon.svg"' in html


@pytest.fixture
def world(team, connection_kept):
    yield build_world(team)
    REAL_IDS.clear()


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
    resource = resource_of(path, {"kind": kind})
    ident = UNKNOWN_ID if unknown else real_id(resource, 0)
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
