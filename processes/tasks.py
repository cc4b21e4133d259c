"""Thin Celery tasks: take ids, call one orchestrator service, hand the next steps on.

The orchestrator decides (which steps are ready, which jobs run on their upstream, which
queue a step goes to); this module only starts and enqueues: ``start_run`` ("run now", for
the API, the pages, the admin and the CLI: the run starts in the request, its steps on the
workers), ``enqueue_run`` and ``hand_on`` (after a run started or a step succeeded, the one
path that sends the next steps and the downstream jobs). The orchestrator never imports
this module.

``run_process`` starts a run and dispatches its first steps; ``run_step`` runs one step and
dispatches the steps that became ready (independent branches go to different workers at
once); ``reap_expired_runs`` is Beat's reaper. The first two are idempotent against
redelivery (a second ``init_job`` gets 104, a second ``init_step`` 106, both are skipped), so
they acknowledge late and are redelivered when a worker dies mid-task; a run whose worker
died for good is ended by the reaper when its lease expires, and re-run by the next run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from typing import Any

from celery import shared_task
from celery.signals import beat_init
from django.conf import settings
from django.db import transaction

from batches import partitions
from batches import queue as batch_queue
from batches.tasks import remove_unused_partitions
from bdre.errors import BdreError, Code
from processes import lifecycle, operations, orchestrator, replay, scan_gate, schedules
from processes.models import InstanceExec, Operation, Process, Trigger

log = logging.getLogger(__name__)

# A scheduled run with nothing to do, or one that finds the previous run still going, is
# not an error of the task: the next tick tries again.
NOTHING_TO_DO = (
    Code.PARENT_ALREADY_RUNNING,
    Code.NO_BATCHES,
    Code.BATCHES_MISSING_FOR_CUT,
    Code.SUB_PROCESS_RUNNING,
)


@shared_task(
    name="processes.tasks.run_process", bind=True, acks_late=True, reject_on_worker_lost=True
)
def run_process(
    self, process_id: int, max_batch: int | None = None, trigger: str = Trigger.SCHEDULE
) -> dict:
    # Beat's periodic tasks send the job's id alone: a run without a trigger is scheduled.
    try:
        started = start_run(process_id, max_batch, worker=self.request.hostname, trigger=trigger)
    except BdreError as exc:
        if exc.code == Code.JOB_PAUSED:  # paused after Beat or the upstream sent this
            log.info("process %s not started: %s", process_id, exc.message)
            return {"process_id": process_id, "started": False, "outcome": "paused"}
        if exc.code in NOTHING_TO_DO:
            log.info("process %s not started: %s", process_id, exc.message)
            return {"process_id": process_id, "started": False, **exc.as_dict()}
        raise
    if isinstance(started, scan_gate.Quiet):
        log.info("process %s not started: %s", process_id, started.detail)
        return {"process_id": process_id, "started": False, "outcome": started.outcome}
    return {"process_id": process_id, "started": True, "run": started.instance_exec_id}


def start_run(
    job_id: int,
    max_batch: int | None = None,
    *,
    worker: str | None = None,
    trigger: str = Trigger.MANUAL,
    force: bool = False,
) -> orchestrator.Started | scan_gate.Quiet:
    """Start a run of the job here and send its first steps to the workers (after the
    commit). "Run now" from the API, the pages, the admin and the CLI starts the run in the
    request, so that the answer names the new run, and a job that is running already (104)
    or has nothing new to consume (112, 109) is the user's answer, not a silent no-op in a
    worker's log; the schedule and the upstream trigger go through ``run_process``. A job
    whose scans find nothing new starts no run: the answer is then ``scan_gate.Quiet``
    (docs/operations.md, "Quiet scans"). A run of a paused job is refused (116): a manual
    one unless ``force``, any other always (``lifecycle.init_job``, under the job's lock)."""
    Process.objects.get_live_job(job_id)
    started = scan_gate.start(
        job_id, max_batch=max_batch, worker=worker, trigger=trigger, force=force
    )
    if isinstance(started, scan_gate.Quiet):
        return started
    hand_on(started.instance_exec_id, started.ready, started.downstream)
    return started


def retry_run(run_id: int) -> orchestrator.Started | scan_gate.Quiet:
    """Retry the failed job run ``run_id`` now: its batch's dead letters put back
    (``orchestrator.put_back_failed``), then a run of its job started here as "Run now"
    starts one (trigger ``retry``), which rebuilds that batch. The lifecycle's answers as
    ``start_run``'s: 104 while the job runs (the rows put back wait for its next run), 116
    when it is paused."""
    job_id = orchestrator.put_back_failed(run_id)
    return start_run(job_id, trigger=Trigger.RETRY)


def retry_row(queue_id: int) -> orchestrator.Started | scan_gate.Quiet:
    """Retry a failed or dead-lettered queue row now: requeued (``queue.requeue``), then a
    run of its job started here, which takes it; ``start_run``'s answers otherwise (104
    while the job runs: the row waits for its next run)."""
    job_id = batch_queue.requeue(queue_id).process.parent_id
    assert job_id is not None  # a queue row is a step's, and a step has its job
    return start_run(job_id, trigger=Trigger.RETRY)


@dataclass(frozen=True)
class ReplayStarted:
    plan: replay.ReplayPlan
    operation: Operation
    rows_put_back: int
    runs: list[int]  # job runs started now
    waiting: list[int]  # jobs running already: their next run rebuilds first
    paused: list[int]  # paused jobs: their batches wait for the resume


def start_replay(
    plan: replay.ReplayPlan, *, asked: dict[str, Any] | None = None, name: str = "", by: Any = None
) -> ReplayStarted:
    """A backfill, rewind or reprocess: its first batches put back in the queue, and a run
    of each of their jobs started (recorded with the plan's trigger). A job running now
    rebuilds on its next run, which its current one triggers; a paused job's batches wait
    for its resume (a pause holds every trigger); the batches downstream are rebuilt as
    each is delivered again."""
    operation = replay.put_back(plan, asked=asked, name=name, by=by)
    runs: list[int] = []
    waiting: list[int] = []
    paused: list[int] = []
    for job_id in plan.jobs_to_start:
        try:
            started = start_run(job_id, trigger=plan.trigger)
        except BdreError as exc:
            if exc.code == Code.JOB_PAUSED:
                paused.append(job_id)
            elif exc.code == Code.PARENT_ALREADY_RUNNING:
                waiting.append(job_id)
            else:
                raise
            continue
        # A job that also scans may answer Quiet: a run another trigger started meanwhile
        # rebuilds first, as any run of the job does.
        run = started.run_id if isinstance(started, scan_gate.Quiet) else started.instance_exec_id
        if run is None:
            waiting.append(job_id)
        else:
            runs.append(run)
    return ReplayStarted(plan, operation, operation.rows_put_back, runs, waiting, paused)


@dataclass(frozen=True)
class CaughtUp:
    operation: Operation
    queued: list[operations.CatchUp]
    run: int | None  # the job's run started now; None: running already, or paused
    why_not: str  # why no run started now, in words


def start_catch_up(job_id: int, since: date, *, name: str = "", by: Any = None) -> CaughtUp:
    """A catch-up: the upstream batches from ``since`` on queued for the job
    (``operations.queue_catch_up``), then a run of it started (trigger ``catch_up``); a job
    running now takes them on its next run, a paused one once resumed."""
    operation, queued = operations.queue_catch_up(job_id, since, name=name, by=by)
    # The batches are queued (committed): a run that cannot start now is said, not an error.
    try:
        started = start_run(job_id, trigger=Trigger.CATCH_UP)
    except BdreError as exc:
        waits = (Code.JOB_PAUSED, Code.PARENT_ALREADY_RUNNING, *NOTHING_TO_DO)
        if exc.code not in waits:
            raise
        return CaughtUp(operation, queued, None, f"no run now: {exc.message} (error {exc.code})")
    run = started.run_id if isinstance(started, scan_gate.Quiet) else started.instance_exec_id
    return CaughtUp(operation, queued, run, "" if run else "a run of the job takes them next")


@shared_task(name="processes.tasks.run_step", bind=True, acks_late=True, reject_on_worker_lost=True)
def run_step(self, job_run_id: int, step_id: int) -> dict:
    done = orchestrator.execute_step(job_run_id, step_id, worker=self.request.hostname)
    if done.state == "succeeded":
        nxt = orchestrator.advance(job_run_id)
        hand_on(job_run_id, nxt.ready, nxt.downstream)
    return {"run": job_run_id, "step": step_id, "state": done.state, "error": done.error}


def hand_on(job_run_id: int, ready: list[int], downstream: list[int]) -> None:
    """After a run started or one of its steps succeeded: send the steps that are ready,
    and start the jobs that run on this one's output."""
    _dispatch(job_run_id, ready)
    for job_id in downstream:
        enqueue_run(job_id)


def _dispatch(job_run_id: int, step_ids: list[int]) -> None:
    """Send each step to the workers once the current transaction commits (a worker must
    see what ``advance`` recorded), on its queue and with the job's time limit."""
    if not step_ids:
        return
    run = InstanceExec.objects.select_related("process").get(pk=job_run_id)
    limit = orchestrator.time_limit_of(run.process)
    limits = {"soft_time_limit": limit, "time_limit": limit + 30} if limit else {}
    for step in Process.objects.select_related("process_type").filter(pk__in=step_ids):
        queue = orchestrator.queue_of(step)

        # The defaults bind each step's own id and queue now, not the loop's last.
        def send(step_id: int = step.pk, queue: str = queue) -> None:
            run_step.apply_async((job_run_id, step_id), queue=queue, **limits)

        transaction.on_commit(send)


def enqueue_run(job_id: int, max_batch: int | None = None) -> None:
    """Queue a whole run of the job on the workers (after the commit): the downstream jobs
    a run triggers."""
    Process.objects.get_live_job(job_id)
    transaction.on_commit(
        lambda: run_process.apply_async(
            (job_id, max_batch), kwargs={"trigger": Trigger.UPSTREAM}, queue=settings.BDRE_QUEUE
        )
    )


def resume(job_id: int) -> schedules.Schedule:
    """Resume the job, and start the run that its pause held back, if any
    (``orchestrator.held_by_its_pause``): for a job that is not timed, nothing else would."""
    shown = schedules.resume(job_id)
    if orchestrator.held_by_its_pause(job_id):
        enqueue_run(job_id)
    return shown


@shared_task(name="processes.tasks.reap_expired_runs")
def reap_expired_runs() -> list[int]:
    reaped = lifecycle.reap_expired()
    if reaped:
        log.warning("reaped expired runs %s", reaped)
    # On the reaper's tick too: the days whose grace has passed are closed, and the jobs
    # downstream that waited for them run.
    for job_id in orchestrator.close_due_days():
        enqueue_run(job_id)
    # The files of failed attempts and of partitions replaced longer ago than the grace.
    removed = partitions.remove_unused()
    if removed:
        log.info("removed the files of unused partitions %s", removed)
    # Those on a store only Hadoop reaches are a Spark worker's to remove, with its session;
    # a task the next tick queues again need not wait behind this one.
    for queue, ids in orchestrator.removals_by_queue().items():
        remove_unused_partitions.apply_async(
            (ids,), queue=queue, expires=settings.BDRE_REAPER_SECONDS
        )
    return reaped


@beat_init.connect(dispatch_uid="bdre-reaper-schedule")
def _schedule_the_reaper(sender: object = None, **kwargs: object) -> None:
    """Beat keeps the reaper in its schedule whatever was deleted by hand."""
    from processes.schedules import ensure_reaper

    ensure_reaper(settings.BDRE_REAPER_SECONDS)


@shared_task(name="processes.tasks.purge_step_logs")
def purge_step_logs() -> int:
    from processes import logfiles

    return logfiles.purge_expired()


@beat_init.connect(dispatch_uid="bdre-step-log-retention")
def _schedule_the_log_purge(sender: object = None, **kwargs: object) -> None:
    """Beat keeps the purge of expired step logs in its schedule (docs/operations.md)."""
    from processes import logfiles

    logfiles.ensure_purge_schedule()
