"""A schemathesis run over every operation of the OpenAPI schema as a developer of a team: no
server error, and every answer keeps to the schema (status code, content type and body). The
run is bounded and repeatable: ``BDRE_FUZZ_EXAMPLES`` cases an operation (8, about half a
minute; 100 for a deeper run) drawn from a fixed seed, and with ``BDRE_FUZZ_BOUNDARIES=1``
schemathesis' boundary and wrong-type cases of every parameter.

One test, each operation a subtest of it: the schema is loaded, and the cases generated, when
it runs."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from urllib.parse import unquote

import coverage
import pytest
import schemathesis
from django.urls import Resolver404, resolve
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

# With the module, at collection: making the WSGI handler sets Django up again, its logging
# too, and amid the session that would add handlers under tests that count log lines.
from bdre.wsgi import application
from tests.helpers.api_world import REAL_IDS, build_world, real_id, resource_of
from tests.helpers.database import rolled_back
from tests.helpers.teams import build_team

EXAMPLES = int(os.environ.get("BDRE_FUZZ_EXAMPLES", "8"))
# schemathesis' coverage phase: each parameter and field at its boundaries and with a value of
# every wrong type, about 9,000 cases (9,157 counted on 2026-11-30; two and a half minutes of
# a core). CI's PostgreSQL pass runs them (BDRE_FUZZ_BOUNDARIES=1 in .ci/run), where the
# database refuses what SQLite keeps.
BOUNDARIES = os.environ.get("BDRE_FUZZ_BOUNDARIES", "") == "1"
# The longest module of the fast set (its 8 cases an operation: 47 s of one process on the
# sixth machine of docs/testing.md), minutes with the boundary cases: `make test` and `make
# test-fast` start it among the first, not last by its count of tests, alone at the end.
pytestmark = [pytest.mark.long]
# Boundary cases the web layer answers, nearly all before any query: a body DRF's parsers do
# not take (415, 400), a value of the wrong type, which the serializers and filters refuse
# (400) or coerce (a number for a CharField, anything for a JSONField: a value of the right
# type then, which the positive cases send); 5,172 of the 10,285 cases generated on
# 2026-11-30 (docs/testing.md, "The fuzzer on PostgreSQL"). Wrong types are still sent, in
# both passes, by the generate phase's negative cases.
DATABASE_BLIND = frozenset(
    {
        "malformed_content_type",
        "unsupported_content_type",
        "incorrect_type",
    }
)


@pytest.fixture
def api_schema(fuzzed_world, connection_kept):
    """Loaded when the test runs, in its world, not when it is collected: generating the
    cases of 130-odd operations took seconds of every test process's collection, the ones
    that never run it too."""
    loaded = schemathesis.openapi.from_wsgi("/api/schema/", application)
    loaded.hook(flatmap_path_parameters)
    loaded.config.phases.coverage.enabled = BOUNDARIES
    # Methods a route does not have: DRF's dispatch answers them (405) before any query, in
    # either database; not even generated (659 cases on 2026-11-30).
    loaded.config.phases.coverage.unexpected_methods = set()
    return loaded


def flatmap_path_parameters(context, parameters):
    """Half of the ids name a real row: an id drawn at random hardly ever does, and the
    fuzzer would never get past the 404 into the operation."""
    path = context.operation.path
    if "{id}" not in path or not isinstance(parameters, dict):
        return st.just(parameters)
    real = st.integers(min_value=0, max_value=10_000).map(
        lambda index: {**parameters, "id": real_id(resource_of(path, parameters), index)}
    )
    return st.one_of(st.just(parameters), real)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request):
    # schemathesis 4.32's lazy schema reads the test's ``_nodeid`` (to name each operation's
    # subtest), which pytest 9's nodes no longer have.
    request.node._nodeid = request.node.nodeid


@pytest.fixture
def fuzzed_world(db):
    """The world the fuzzer's cases run in, a developer's token into it; each case runs in a
    savepoint rolled back after it, so what one writes is gone before the next."""
    yield build_world(build_team())
    REAL_IDS.clear()


@pytest.fixture
def traced_requests() -> Iterator[Callable[[], AbstractContextManager[None]]]:
    """Under coverage (CI's SQLite pass), what to trace the requests in, and nothing else:
    drawing each case (hypothesis) and checking each answer against the schema (schemathesis)
    run none of BDRE's code, and traced they run at half speed, as Python 3.11 sends every
    line of every frame through the tracer. Without coverage, nothing to do."""
    cov = coverage.Coverage.current()
    if cov is None:
        yield contextlib.nullcontext
        return
    cov.stop()
    try:
        yield cov.collect
    finally:
        cov.start()


# backends: what the fuzzer sends (NUL bytes, huge numbers, odd text) is what one database
# stores and another refuses (docs/testing.md).
@pytest.mark.backends
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    # Drawn from a fixed seed. Yet CI of b2f62d8 drew a path id its earlier runs had not
    # ("import", below), the cause not found: each case is judged on its own.
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
    database=None,
)
@schema.parametrize()
def test_fuzzing_the_api_finds_no_server_error_and_no_answer_outside_the_schema(
    case, fuzzed_world, connection_kept, traced_requests
):
    if getattr(case.meta.phase.data, "scenario", None) in DATABASE_BLIND:
        return  # generated, not sent: see DATABASE_BLIND
    send_and_check(case, fuzzed_world, traced_requests)


def send_and_check(
    case, token: str, traced: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
) -> None:
    """Send the case and check the answer: schemathesis' call_and_validate, its request
    apart (traced_requests)."""
    if names_another_route(case):
        # `PATCH /processes/import/` (the id "import", drawn in a CI run) is the import's
        # URL, which answers for itself (405 to a PATCH), not for the operation.
        return
    headers = {"Authorization": token}
    with rolled_back():
        with traced():
            response = case.call(headers=headers)
        case.validate_response(
            response,
            checks=[
                not_a_server_error,
                status_code_conformance,
                content_type_conformance,
                response_schema_conformance,
            ],
            headers=headers,
            transport_kwargs={"headers": dict(headers)},
        )


def names_another_route(case) -> bool:
    """Whether the case's path, its parameters put in, is the URL of another operation than
    its own: a parameter that spells a sibling's segment (``import``, ``discard``). A path
    no operation has (an id that is no number) is the case's own: the API's 404 answers it."""
    own = operation_of(re.sub(r"\{[^}/]+\}", "1", case.path))
    other = operation_of(unquote(case.formatted_path))
    return other is not None and other != own


def operation_of(path: str) -> str | None:
    """The name of the route ``path`` resolves to; None for no route and for the API's
    catch-all, which has no name."""
    try:
        return resolve(path).url_name
    except Resolver404:
        return None


def test_an_id_spelling_a_sibling_route_is_that_routes_url_not_a_failure(api_schema, fuzzed_world):
    """Drawn by the fuzzer in CI of b2f62d8: the id "import" of PATCH /processes/{id}/ is
    `/processes/import/`, the import's URL, whose 405 to a PATCH is no answer of the
    operation's."""
    operation = api_schema["/api/v1/processes/{id}/"]["PATCH"]
    sibling = operation.Case(
        path_parameters={"id": "import"}, body={}, media_type="application/json"
    )
    assert names_another_route(sibling)
    send_and_check(sibling, fuzzed_world)
    # An id of no process, and one that is no number (the API's catch-all answers it): both
    # the operation's own, both sent and checked.
    for own_id in (10**9, "9C\u00d0"):
        own = operation.Case(path_parameters={"id": own_id}, body={}, media_type="application/json")
        assert not names_another_route(own), own_id
        send_and_check(own, fuzzed_world)  # 404
