from __future__ import annotations

from batches.locations import team_landing
from processes.models import Process


def steps_of(job: Process) -> list[Process]:
    return list(job.steps.order_by("id"))


def landed(job: Process, name: str) -> str:
    """A path in the landing folder of ``job``'s team: inside the storage every team owns."""
    return str(team_landing(job.bus_domain.team_id) / name)
