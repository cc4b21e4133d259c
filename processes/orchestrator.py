"""Runs one job around its steps: init_job, each step in workflow order (init_step, its kind,
halt_step or term_step), then halt_job, or term_job on the first failure. A re-run skips the
steps init_job says already succeeded.

This module runs the steps one after the other in the calling process; the Celery tasks
drive the same calls step by step on the workers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from processes import jobs, lifecycle
from processes.models import Process, Property
from processes.workflow import steps_in_order

log = logging.getLogger(__name__)
DEFAULT_MAX_BATCH = 100


@dataclass
class RunOutcome:
    job_id: int
    instance_exec_id: int
    target_batch_id: int
    succeeded: bool
    is_rerun: bool
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)  # step id -> counters
    error: str = ""


def max_batch_of(job: Process) -> int:
    """The job's ``run.max_batch`` property, or 100."""
    raw = (
        Property.objects.filter(process=job, config_group="run", key="max_batch")
        .values_list("value", flat=True)
        .first()
    )
    return int(raw) if raw else DEFAULT_MAX_BATCH


def run_job(
    job_id: int,
    *,
    max_batch: int | None = None,
    worker: str | None = None,
    options: dict[str, Any] | None = None,
) -> RunOutcome:
    job = Process.objects.get(pk=job_id)
    claim = lifecycle.init_job(
        job_id, max_batch if max_batch is not None else max_batch_of(job), worker=worker
    )
    outcome = RunOutcome(
        job_id=job_id,
        instance_exec_id=claim.instance_exec_id,
        target_batch_id=claim.target_batch_id,
        succeeded=False,
        is_rerun=claim.is_rerun,
    )
    for step in steps_in_order(job):
        if step.pk in claim.skipped_step_ids:
            continue
        step_run = lifecycle.init_step(
            step.pk, worker=worker, instance_exec_id=claim.instance_exec_id
        )
        batches = claim.steps[step.pk]
        context = jobs.JobContext(
            step=step,
            job_run_id=claim.instance_exec_id,
            step_run_id=step_run,
            target_batch_id=claim.target_batch_id,
            batch_ids=batches.batch_ids,
            files=batches.files,
            options=options or {},
        )
        try:
            outcome.steps[step.pk] = jobs.run_step(context)
        except Exception as exc:  # a step's failure of any kind fails the run, kept as text
            error = f"{type(exc).__name__}: {exc}"
            log.exception("step %s of job %s failed", step.name, job.name)
            lifecycle.term_step(step.pk, error, instance_exec_id=step_run)
            lifecycle.term_job(job_id, error, instance_exec_id=claim.instance_exec_id)
            outcome.error = error
            return outcome
        lifecycle.halt_step(step.pk, instance_exec_id=step_run)
        lifecycle.heartbeat(claim.instance_exec_id)
    lifecycle.halt_job(job_id, instance_exec_id=claim.instance_exec_id)
    outcome.succeeded = True
    return outcome
