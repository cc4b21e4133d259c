from __future__ import annotations

import pytest
from django.test import Client

from processes.registry import StepSpec, create_job
from tests.factories import JOB_TYPE

CALL = 51


def client_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def pipeline(team):
    """A job of two ``python.callable`` steps in the team's application, run once."""
    from processes import orchestrator

    steps = [
        StepSpec(name, CALL, properties={"callable": {"path": "tests.processes.callables.sleep"}})
        for name in ("load", "report")
    ]
    job = create_job(
        bus_domain=team.application, name="clicks", process_type_id=JOB_TYPE, steps=steps
    )
    outcome = orchestrator.run_job(job.pk)
    return job, outcome
