"""The lifecycle's and the queue's signals, turned into alerts: a job's run that failed, a
step's expectation that failed rows, and input that went to the dead letter. Each alert is
sent by a task after the commit."""

from __future__ import annotations

from django.dispatch import receiver

from alerts import services, tasks
from alerts.models import Kind
from batches.events import dead_lettered
from processes.events import run_ended
from processes.models import ExecState


@receiver(run_ended, dispatch_uid="bdre-alerts-run-ended")
def _run_ended(
    sender: object,
    *,
    run_id: int,
    process_id: int,
    parent_id: int | None,
    state: int,
    error: str,
    **kwargs: object,
) -> None:
    # A step's failure fails its job's run, which is what is told; an expectation that
    # failed rows is told for the step that checked it, failed or not.
    failed = services.failed_checks(run_id) if parent_id is not None else None
    if failed is not None:
        job_id, detail = failed
        tasks.enqueue(Kind.CHECK, job_id, run_id=parent_id, detail=detail)
    if parent_id is None and state == ExecState.FAILED:
        tasks.enqueue(Kind.FAILURE, process_id, run_id=run_id, detail=error)
    if parent_id is None:
        tasks.enqueue_if_late(run_id)


@receiver(dead_lettered, dispatch_uid="bdre-alerts-dead-lettered")
def _dead_lettered(
    sender: object, *, queue_ids: list[int], reason: str, by_hand: bool, **kwargs: object
) -> None:
    how = "discarded by hand" if by_hand else "failed too many runs"
    for job_id, rows in services.dead_letter_jobs(queue_ids).items():
        detail = f"{rows} queue row(s) went to the dead letter ({how}): {reason}"
        tasks.enqueue(Kind.DEAD_LETTER, job_id, detail=detail)
