"""The lifecycle (processes/lifecycle.py) driven by hand, as a scheduler drives it: whole runs,
the batches they queue downstream, the error codes it answers, the files it registers."""

from __future__ import annotations

import pytest

from batches.locations import team_landing
from batches.models import BatchConsumpQueue
from bdre.errors import BdreError
from processes import lifecycle
from processes.models import Process


def steps_of(job: Process) -> list[Process]:
    return list(job.steps.order_by("id"))


def landed(job: Process, name: str) -> str:
    """A path in the landing folder of ``job``'s team: inside the storage every team owns."""
    return str(team_landing(job.bus_domain.team_id) / name)


def code_of(call, *args, **kwargs) -> int:
    with pytest.raises(BdreError) as excinfo:
        call(*args, **kwargs)
    return int(excinfo.value.code)


def run_job(job, max_batch=None, fail_step=None, on_step=None):
    """A whole run: init_job, every step in order, halt_job (or term on ``fail_step``);
    ``on_step(step, step_run_id, result)`` after each step's start: what its body does."""
    result = lifecycle.init_job(job.pk, max_batch)
    for step in steps_of(job):
        if step.pk in result.skipped_step_ids:
            continue
        step_run = lifecycle.init_step(step.pk)
        if on_step is not None:
            on_step(step, step_run, result)
        if step == fail_step:
            lifecycle.term_step(step.pk, "step broke")
            lifecycle.term_job(job.pk, "step broke")
            return result
        lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)
    return result


def queued(step, state=None):
    """The rows queued for ``step`` (in ``state``), oldest first."""
    rows = BatchConsumpQueue.objects.filter(process=step)
    if state is not None:
        rows = rows.filter(batch_state_id=state)
    return list(rows.order_by("id"))


def feed(job, step_marks: list[str]) -> list[int]:
    """Run ``job`` (no upstream) once per marking, so each run queues one batch downstream."""
    batches = []
    for mark in step_marks:
        result = lifecycle.init_job(job.pk)
        for step in steps_of(job):
            lifecycle.init_step(step.pk)
            lifecycle.halt_step(step.pk)
        lifecycle.halt_job(job.pk, mark)
        batches.append(result.target_batch_id)
    return batches


def run_marked(job, days: str) -> int:
    """A run of ``job`` whose steps mark its batch with ``days``, as a step does
    (``StepContext.mark_batch``); halt_job is given no marking. Returns its batch."""
    from processes.models import InstanceExec

    result = lifecycle.init_job(job.pk)
    for step in steps_of(job):
        step_run_id = lifecycle.init_step(step.pk)
        InstanceExec.objects.filter(pk=step_run_id).update(batch_marking=days)
        lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)
    return result.target_batch_id
