from __future__ import annotations

import pytest

from batches.locations import team_landing
from processes.models import Process
from processes.registry import StepSpec, create_job
from tests.factories import JOB_TYPE, STEP_TYPE


@pytest.fixture
def make_job(team):
    """``make_job("p2", steps=2, upstream=[p1])``: a job registered through the registry,
    its steps chained in order, all in the team's application."""

    def make(
        name: str,
        *,
        steps: int = 1,
        upstream: list[Process] | None = None,
        cut: str = "",
        max_retries: int = 3,
        lease_seconds: int = 3600,
        can_recover: bool = True,
    ) -> Process:
        return create_job(
            bus_domain=team.application,
            name=name,
            process_type_id=JOB_TYPE,
            max_retries=max_retries,
            lease_seconds=lease_seconds,
            steps=[
                StepSpec(
                    f"{name}_s{i + 1}",
                    STEP_TYPE,
                    upstream=[u.pk for u in upstream or []],
                    batch_cut_pattern=cut,
                    can_recover=can_recover,
                )
                for i in range(steps)
            ],
        )

    return make


def steps_of(job: Process) -> list[Process]:
    return list(job.steps.order_by("id"))


def landed(job: Process, name: str) -> str:
    """A path in the landing folder of ``job``'s team: inside the storage every team owns."""
    return str(team_landing(job.bus_domain.team_id) / name)
