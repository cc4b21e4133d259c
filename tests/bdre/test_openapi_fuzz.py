"""A schemathesis run over every operation of the OpenAPI schema as a developer of a team: no
server error, and every answer keeps to the schema (status code, content type and body). The
run is bounded and repeatable: ``BDRE_FUZZ_EXAMPLES`` cases an operation (8, about a minute;
100 for a deeper run) drawn from a fixed seed.

The world the fuzzer runs in is built once for the module (`make test` gives a module's tests to
one test process)."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.db import transaction
from django.test import override_settings
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.helpers.api_world import REAL_IDS, build_world, real_id, resource_of
from tests.helpers.teams import build_team

EXAMPLES = int(os.environ.get("BDRE_FUZZ_EXAMPLES", "8"))


def _load_schema():
    from bdre.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/schema/", application)


schema = _load_schema()


@schema.hook
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


@pytest.fixture(scope="module")
def fuzzed_world(django_db_setup, django_db_blocker):
    """The world, built once for the fuzzer's 130-odd operations (building it took longer
    than fuzzing most of them) in a transaction rolled back at the end; each operation's
    cases run in a savepoint of it (pytest-django's ``db``), so what one writes is gone
    before the next."""
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            with override_settings(
                PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]
            ):
                yield build_world(build_team())
        finally:
            REAL_IDS.clear()
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


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
def test_fuzzing_the_api_finds_no_server_error_and_no_answer_outside_the_schema(
    case, fuzzed_world, connection_kept
):
    case.call_and_validate(
        headers={"Authorization": fuzzed_world},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
