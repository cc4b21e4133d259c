"""Runs a job around its steps: ``init_job``, each step once all the steps before it in the
workflow (``next_processes``) have succeeded (``init_step``, its kind, ``halt_step`` or
``term_step``), then ``halt_job``, or ``term_job`` on the first failure. A re-run skips the
steps ``init_job`` says already succeeded and resumes at ``last_recoverable_sp_id``.

Three services, each one short transaction around the lifecycle calls, so that the same
code drives a job in one process (``run_job``, for the CLI and tests) and across Celery
workers (``processes.tasks``), where independent branches run in parallel:

- ``start`` runs ``init_job`` and returns the steps ready to start;
- ``execute_step`` runs one step of a running job, renewing the leases while it works;
- ``advance`` (called after each successful step) returns the steps that became ready and
  halts the job when every step is done. It holds the job's row lock, and records which
  steps it handed out on the run, so that two branches finishing together never start the
  step that joins them twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from batches import partitions
from batches import queue as batch_queue
from batches.models import BatchConsumpQueue, BatchState
from bdre.errors import BdreError, Code
from bdre.jsonlog import run_context
from processes import days, lifecycle, logfiles, run_inputs, schedules, step_kinds
from processes.models import ExecState, InstanceExec, Process, Trigger
from processes.step_kinds import checks
from processes.workflow import predecessors, steps_in_order

log = logging.getLogger(__name__)
DEFAULT_MAX_BATCH = 100


def run_setting(job: Process, key: str) -> str | None:
    """A job's ``run.<key>`` property."""
    return job.property_value("run", key)


def max_batch_of(job: Process) -> int:
    """The job's ``run.max_batch`` property, or 100."""
    raw = run_setting(job, "max_batch")
    return int(raw) if raw else DEFAULT_MAX_BATCH


def time_limit_of(job: Process) -> int | None:
    """The job's ``run.time_limit_seconds``: a step running longer is stopped and fails."""
    raw = run_setting(job, "time_limit_seconds")
    return int(raw) if raw else None


def batch_marking_of(job: Process, now: datetime) -> str | None:
    """The job's ``run.batch_marking`` (strftime placeholders allowed, ``EOD`` for the
    demo's end-of-day cut), or None for the lifecycle's default marking."""
    raw = run_setting(job, "batch_marking")
    return timezone.localtime(now).strftime(raw) if raw else None


# --- start ---------------------------------------------------------------------------------


@dataclass
class Started:
    job_id: int
    instance_exec_id: int
    target_batch_id: int
    is_rerun: bool
    ready: list[int]  # steps to start now
    finished: bool = False  # a job with nothing left to run halted at once
    downstream: list[int] = field(default_factory=list)  # jobs to trigger (on_upstream)


def start(
    job_id: int,
    *,
    max_batch: int | None = None,
    worker: str | None = None,
    trigger: str = Trigger.MANUAL,
    force: bool = False,
) -> Started:
    """``init_job`` and the first steps to run. Raises the lifecycle's BdreError (104 when
    a run is going, 112 or 109 when there is nothing to consume, 116 when it is paused and
    not ``force``d)."""
    job = Process.objects.get(pk=job_id)
    claim = lifecycle.init_job(
        job_id,
        max_batch if max_batch is not None else max_batch_of(job),
        worker=worker,
        trigger=trigger,
        force=force,
    )
    InstanceExec.objects.filter(pk=claim.instance_exec_id).update(
        plan={"skipped": claim.skipped_step_ids, "dispatched": []}
    )
    nxt = advance(claim.instance_exec_id)
    return Started(
        job_id=job_id,
        instance_exec_id=claim.instance_exec_id,
        target_batch_id=claim.target_batch_id,
        is_rerun=claim.is_rerun,
        ready=nxt.ready,
        finished=nxt.finished,
        downstream=nxt.downstream,
    )


# --- advance -------------------------------------------------------------------------------


@dataclass
class Advance:
    ready: list[int] = field(default_factory=list)
    finished: bool = False  # halt_job ran
    downstream: list[int] = field(default_factory=list)  # jobs to trigger (on_upstream)


@transaction.atomic
def advance(job_run_id: int) -> Advance:
    """The steps of the running job that may start now (every step before them done), marked
    as handed out; or, when all are done, ``halt_job``. Nothing for a run that ended."""
    run = InstanceExec.objects.select_related("process").get(pk=job_run_id)
    # The lifecycle's lock.
    job = Process.objects.select_for_update(no_key=True).get(pk=run.process_id)
    run.refresh_from_db(fields=["exec_state", "plan"])
    if run.exec_state_id != ExecState.RUNNING:
        return Advance()
    steps = steps_in_order(job)
    before = predecessors(steps)
    states: dict[int, int] = {}
    for step_id, state in (
        InstanceExec.objects.filter(parent_id=job_run_id)
        .order_by("id")
        .values_list("process_id", "exec_state_id")
    ):
        states[step_id] = state  # the latest run of each step
    done = set(run.plan.get("skipped", [])) | {
        s for s, state in states.items() if state == ExecState.SUCCESS
    }
    if all(s.pk in done for s in steps):
        lifecycle.halt_job(
            job.pk,
            batch_marking_of(job, run.start_ts),
            instance_exec_id=job_run_id,
        )
        # A backfill or rewind puts several batches back: each run rebuilds one, and the
        # job runs again while any is left (not after a failure: no storm of retries).
        again = [job.pk] if run_inputs.has_rebuilds(job.pk) else []
        return Advance(finished=True, downstream=triggered_by(job) + again)
    handed_out = set(run.plan.get("dispatched", [])) | done | set(states)
    ready = [s.pk for s in steps if s.pk not in handed_out and before[s.pk] <= done]
    if ready:
        plan = dict(run.plan)
        plan["dispatched"] = sorted(set(plan.get("dispatched", [])) | set(ready))
        InstanceExec.objects.filter(pk=job_run_id).update(plan=plan)
    return Advance(ready=ready)


def held_by_its_pause(job_id: int) -> bool:
    """Whether a run of the resumed job has work the pause held back: batches put back to
    be rebuilt (a replay, a backfill's next rebuild), or, for a job that runs on its
    upstream, batches its upstream queued meanwhile (no upstream run will come again for
    them). A job with a timed schedule gets them on its next tick all the same."""
    from processes.schedules import runs_on_upstream

    if run_inputs.has_rebuilds(job_id):
        return True
    return runs_on_upstream(job_id) and run_inputs.has_queued_input(job_id)


def close_due_days(now: datetime | None = None) -> list[int]:
    """Close the days whose grace has passed (``days.close_due_days``); returns the jobs to
    run now: those that run on a job that closed a day, whose batches of it now end a day."""
    closed = days.close_due_days(now)
    jobs = Process.objects.filter(pk__in=closed).order_by("id")
    return sorted({downstream for job in jobs for downstream in triggered_by(job)})


def triggered_by(job: Process) -> list[int]:
    """Jobs that run as soon as ``job`` queued a batch for one of their steps (a paused job
    does not: its batches wait for it to be resumed)."""
    from processes.schedules import paused, runs_on_upstream

    downstream = (
        Process.objects.filter(
            parent__isnull=False,
            deleted=False,
            enqueuing_processes=job,
            parent__deleted=False,
        )
        .values_list("parent_id", flat=True)
        .distinct()
    )
    held = paused(list(set(downstream)))
    return sorted(pk for pk in set(downstream) - held if runs_on_upstream(pk))


# --- execute_step --------------------------------------------------------------------------


class Heartbeat:
    """Renews the leases of a job run and its step run from a background thread while the
    step works. When a renewal says the lease is lost (the run was terminated or reaped),
    the step's Spark work in this process is cancelled, so that it stops writing."""

    def __init__(self, job_run_id: int, step_run_id: int, every: float | None = None):
        self.ids = (job_run_id, step_run_id)
        self.every = every if every is not None else settings.BDRE_HEARTBEAT_SECONDS
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="bdre-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        # Inside a caller's transaction (a test, a nested call) another connection could not
        # see the run, and on SQLite would wait for the caller's write lock: no thread then.
        if not connection.in_atomic_block:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.every):
                try:
                    for run_id in self.ids:
                        lifecycle.heartbeat(run_id)
                except BdreError as exc:
                    log.warning("run %s lost its lease (%s): cancelling its work", self.ids, exc)
                    self.lost.set()
                    break
                except Exception:  # a database hiccup: try again at the next beat
                    log.exception("heartbeat of runs %s failed", self.ids)
                    close_old_connections()
            # Cancel again at every beat until the step gives up: a Spark job the step
            # submits after a cancellation would otherwise run to its end.
            while self.lost.is_set():
                step_kinds.cancel_running_work()
                if self._stop.wait(self.every):
                    break
        finally:
            connection.close()


@dataclass
class StepOutcome:
    step_id: int
    state: str  # "succeeded", "failed", or "skipped" (not this worker's to run)
    counters: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    step_run_id: int | None = None


def execute_step(
    job_run_id: int,
    step_id: int,
    *,
    worker: str | None = None,
    options: dict[str, Any] | None = None,
) -> StepOutcome:
    """Run one step of a running job. On failure the step and the job are terminated (the
    job's first failure ends the run; the re-run resumes here). A step whose job run ended,
    or that another worker already started (a redelivered message), is skipped."""
    step = Process.objects.select_related("process_type").get(pk=step_id)
    run = InstanceExec.objects.filter(pk=job_run_id).first()
    if run is None or run.exec_state_id != ExecState.RUNNING:
        return StepOutcome(step_id, "skipped", error="the job run is not running")
    target_batch_id = run.target_batch_id
    if target_batch_id is None:  # a step's run, not a job's: init_job gives each its batch
        return StepOutcome(step_id, "skipped", error=f"run {job_run_id} is not a job's run")
    if InstanceExec.objects.filter(
        parent_id=job_run_id, process_id=step_id, exec_state_id=ExecState.SUCCESS
    ).exists():
        return StepOutcome(step_id, "skipped", error="the step already succeeded in this run")
    try:
        step_run = lifecycle.init_step(step_id, worker=worker, instance_exec_id=job_run_id)
    except BdreError as exc:
        if exc.code in (Code.SUB_PROCESS_ALREADY_RUNNING, Code.LEASE_LOST, Code.PARENT_NOT_RUNNING):
            return StepOutcome(step_id, "skipped", error=exc.message)
        raise
    batches = run_inputs.step_batches(target_batch_id, step)
    context = step_kinds.StepContext(
        step=step,
        job_run_id=job_run_id,
        step_run_id=step_run,
        target_batch_id=target_batch_id,
        batch_ids=batches.batch_ids,
        files=batches.files,
        options=options or {},
    )
    with run_context(job_run_id, step_run), Heartbeat(job_run_id, step_run) as beat:
        try:
            with logfiles.capture(job_run_id, step_run, step.name):
                checks.check_step_run(context)
                counters = step_kinds.run_step(context)
        except BaseException as exc:  # any failure, a time limit included, fails the run
            error = f"{type(exc).__name__}: {exc}"
            if beat.lost.is_set():
                error = f"terminated while running ({error})"
            log.warning("step %s of run %s failed: %s", step.name, job_run_id, error)
            _fail(step, step_run, job_run_id, error)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt, SystemExit: after the bookkeeping
            return StepOutcome(step_id, "failed", error=error, step_run_id=step_run)
    try:
        lifecycle.halt_step(step_id, instance_exec_id=step_run)
    except BdreError as exc:  # terminated or reaped meanwhile: its output is not used
        return StepOutcome(step_id, "failed", error=exc.message, step_run_id=step_run)
    return StepOutcome(step_id, "succeeded", counters=counters, step_run_id=step_run)


def _fail(step: Process, step_run: int, job_run_id: int, error: str) -> None:
    job_id = step.parent_id
    assert job_id is not None  # a step that ran (init_step) is a job's step
    calls: list[Callable[[], None]] = [
        lambda: lifecycle.term_step(step.pk, error, instance_exec_id=step_run),
        lambda: lifecycle.term_job(job_id, error, instance_exec_id=job_run_id),
    ]
    for call in calls:
        try:
            call()
        except BdreError as exc:  # already terminated (by a user or the reaper)
            log.info("%s", exc.message)


# --- on the workers ------------------------------------------------------------------------


def queue_of(step: Process) -> str:
    """Spark steps go to a Spark queue (workers sized for Spark): the one the step names
    (``run.spark_queue``, a pool whose executors are sized for it), else the default one;
    the other steps to the default queue. A queue no longer among ``BDRE_SPARK_QUEUES``
    goes to the default Spark queue, whose worker fails the step saying why
    (``checks.check_step_run``): sent to a queue nobody reads, it would wait forever."""
    kind = step_kinds.find(step.process_type.job_kind)
    if kind is None or not kind.spark:
        return settings.BDRE_QUEUE
    named = step.property_value("run", "spark_queue")
    return named if named in settings.BDRE_SPARK_QUEUES else settings.BDRE_SPARK_QUEUE


def removals_by_queue(now: datetime | None = None) -> dict[str, list[int]]:
    """The unused partitions on a store only Hadoop reaches, by the Spark queue whose
    sessions wrote them (their pool's connectors and credentials reach the store; a
    partition adopted from before attempts: the default Spark queue)."""
    found: dict[str, list[int]] = {}
    for partition in partitions.left_for_spark(now):
        run = partition.step_run
        queue = settings.BDRE_SPARK_QUEUE if run is None else queue_of(run.process)
        found.setdefault(queue, []).append(partition.pk)
    return found


# --- retry ---------------------------------------------------------------------------------


def put_back_failed(run_id: int) -> int:
    """What a retry of the failed job run ``run_id`` needs before its job runs again: the
    dead letters of its batch requeued (``queue.requeue`` puts back the whole claim, so the
    next run rebuilds that same batch, as a retry would); rows still failed wait for that
    run as they are. The job's id. 117 for no job run; 118 for a run that did not fail, or
    whose batch a later run delivered (it is resolved: nothing is left to retry)."""
    run = InstanceExec.objects.filter(pk=run_id, parent__isnull=True).first()
    if run is None:
        raise BdreError(Code.UNKNOWN_ROW, f"{run_id} is no run of a job")
    if run.exec_state_id not in ExecState.failed():
        raise BdreError(Code.QUEUE_STATE_CONFLICT, f"run {run_id} did not fail: nothing to retry")
    resolved = run.resolved_by()
    if resolved is not None:
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            f"run {run_id} is resolved: run {resolved.pk} delivered its batch "
            f"{run.target_batch_id}",
        )
    job = Process.objects.get_live_job(run.process_id)  # 102 for a deleted job
    # Refused before a row is put back: a retry that cannot start changes nothing.
    schedules.hold(job.pk, manual=True)
    if InstanceExec.objects.filter(process=job, exec_state_id=ExecState.RUNNING).exists():
        raise BdreError(
            Code.PARENT_ALREADY_RUNNING,
            f"{job.name} is running: its next run takes the failed batch {run.target_batch_id}",
        )
    if run.target_batch_id is None:
        return job.pk
    delivered = InstanceExec.objects.filter(
        process=job,
        parent__isnull=True,
        exec_state_id=ExecState.SUCCESS,
        target_batch_id=run.target_batch_id,
    ).first()
    if delivered is not None:
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            f"batch {run.target_batch_id} was delivered by run {delivered.pk} before run "
            f"{run_id} rebuilt it: reprocess the batch to build it again",
        )
    # Dead letters only: a row someone discarded, with a reason, stays out.
    dead = (
        BatchConsumpQueue.objects.filter(
            process__parent=job,
            target_batch_id=run.target_batch_id,
            batch_state_id=BatchState.DISCARDED,
            discard_reason="",
        )
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    if dead is not None:
        batch_queue.requeue(dead)
    return job.pk


# --- terminate -----------------------------------------------------------------------------


def terminate(job_id: int, reason: str = "terminated by a user") -> int:
    """Stop the job's running run: it is terminated at once (its steps fail, its input goes
    back to the queue for the re-run), and the worker running a step notices at its next
    heartbeat and cancels its Spark work. Returns the run's id; 105 when nothing runs."""
    run_id = (
        InstanceExec.objects.filter(process_id=job_id, exec_state_id=ExecState.RUNNING)
        .values_list("pk", flat=True)
        .first()
    )
    if run_id is None:
        raise BdreError(Code.PROCESS_NOT_RUNNING, f"process {job_id}")
    lifecycle.term_job(job_id, reason, instance_exec_id=run_id)
    return run_id


# --- in one process ------------------------------------------------------------------------


@dataclass
class RunOutcome:
    job_id: int
    instance_exec_id: int
    target_batch_id: int
    succeeded: bool
    is_rerun: bool
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)  # step id -> counters
    error: str = ""


def run_job(
    job_id: int,
    *,
    max_batch: int | None = None,
    worker: str | None = None,
    options: dict[str, Any] | None = None,
    force: bool = False,
) -> RunOutcome:
    """Run a whole job in this process, its steps one after the other in workflow order
    (a paused job only when ``force``d)."""
    started = start(job_id, max_batch=max_batch, worker=worker, force=force)
    outcome = RunOutcome(
        job_id=job_id,
        instance_exec_id=started.instance_exec_id,
        target_batch_id=started.target_batch_id,
        succeeded=started.finished,
        is_rerun=started.is_rerun,
    )
    pending = list(started.ready)
    while pending:
        done = execute_step(
            started.instance_exec_id, pending.pop(0), worker=worker, options=options
        )
        if done.state != "succeeded":
            outcome.error = done.error
            return outcome
        outcome.steps[done.step_id] = done.counters
        nxt = advance(started.instance_exec_id)
        pending += nxt.ready
        if nxt.finished:
            outcome.succeeded = True
    return outcome
