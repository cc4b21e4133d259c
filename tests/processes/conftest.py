from __future__ import annotations

import pytest

from batches.locations import team_landing
from processes.models import ExecState, InstanceExec, Process
from processes.registry import StepSpec, create_job
from tests.factories import JOB_TYPE
from tests.processes.workers import Worker, purge_broker, worker_env

CALL = 51  # the python.callable step type


def steps_of(job: Process) -> list[Process]:
    return list(job.steps.order_by("id"))


def landed(job: Process, name: str) -> str:
    """A path in the landing folder of ``job``'s team: inside the storage every team owns."""
    return str(team_landing(job.bus_domain.team_id) / name)


# --- jobs run by real Celery workers (test_tasks.py, test_orchestrator.py) -----------------


@pytest.fixture
def worker(tmp_path, settings):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    purge_broker()
    workers: list[Worker] = []

    def start(**env: str) -> Worker:
        w = Worker(tmp_path / f"worker{len(workers)}.log", worker_env(tmp_path, **env)).start()
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.stop()


def callable_step(name: str, path: str = "", **test: str) -> StepSpec:
    properties = {"callable": {"path": path}} if path else {}
    if test:
        properties["test"] = test
    return StepSpec(name, CALL, properties=properties)


def job_of(team, name: str, steps: list[StepSpec], links: dict[str, list[str]] | None = None):
    """A job whose steps follow ``links`` (step name -> next step names); chained in order
    when no links are given."""
    job = create_job(bus_domain=team.application, name=name, process_type_id=JOB_TYPE, steps=steps)
    if links is not None:
        by_name = {s.name: s for s in job.steps.all()}
        job.next_processes.set([by_name[n] for n in links.get(name, [])])
        for step in by_name.values():
            step.next_processes.set([by_name[n] for n in links.get(step.name, [])])
    return job


def runs_of(process: Process):
    return InstanceExec.objects.filter(process=process).order_by("id")


def finished_runs(job: Process) -> list[InstanceExec]:
    return list(runs_of(job).exclude(exec_state_id=ExecState.RUNNING))
