"""The job lifecycle: BDRE's InitJob, HaltJob, TermJob, InitStep, HaltStep and TermStep.

Each public function is one database transaction and enforces its rules by raising
:class:`bdre.errors.BdreError` in the order DESIGN.md section 4 gives. All calls on one job
take a row lock on the job first (on PostgreSQL; SQLite's immediate transactions serialise
all writers), so the checks and the writes that follow them cannot interleave with another
call on the same job. The partial unique index on running instances backs the lock up.

A caller that passes its ``instance_exec_id`` is fenced: once its run was expired by the
reaper (and perhaps replaced), its halt, term or heartbeat fails with 115 and changes nothing.
"""

from __future__ import annotations

import os
import socket
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from batches import events as queue_events
from batches import markings, partitions
from batches import queue as batch_queue
from batches.models import Batch, BatchConsumpQueue
from bdre.errors import BdreError, Code
from processes import days, events, run_inputs, schedules
from processes.models import ExecState, InstanceExec, Process, Trigger
from processes.workflow import steps_in_order

Queue = BatchConsumpQueue


@dataclass
class InitJobResult:
    instance_exec_id: int
    target_batch_id: int
    last_recoverable_sp_id: int | None
    target_batch_marking: str
    steps: dict[int, run_inputs.StepBatches]
    is_rerun: bool = False
    skipped_step_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["steps"] = {str(k): v for k, v in data["steps"].items()}
        return data


def default_worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# --- helpers (run inside the caller's transaction) ----------------------------------------


def _lock_step(sub_process_id: int) -> tuple[Process, Process]:
    step = (
        Process.objects.filter(pk=sub_process_id, deleted=False, parent__isnull=False)
        .only("id", "parent_id", "lease_seconds", "name")
        .first()
    )
    if step is None:
        raise BdreError(Code.INVALID_SUB_PROCESS, f"{sub_process_id} is not a live step")
    assert step.parent_id is not None  # filtered on parent__isnull=False
    job = Process.objects.select_for_update(no_key=True).get(pk=step.parent_id)
    return job, step


def _running(process: Process, instance_exec_id: int | None, not_running: Code) -> InstanceExec:
    """The process's RUNNING instance; 115 if the caller's own instance is no longer it."""
    run = InstanceExec.objects.filter(process=process, exec_state_id=ExecState.RUNNING).first()
    if instance_exec_id is not None and (run is None or run.pk != instance_exec_id):
        mine = InstanceExec.objects.filter(pk=instance_exec_id, process=process).first()
        if mine is None:
            raise BdreError(not_running, f"run {instance_exec_id} is not a run of {process.name}")
        raise BdreError(
            Code.LEASE_LOST,
            f"run {instance_exec_id} of {process.name} is {ExecState(mine.exec_state_id).name}"
            + (f"; run {run.pk} replaced it" if run else ""),
        )
    if run is None:
        raise BdreError(not_running, f"{process.name} ({process.pk})")
    return run


def _lease(process: Process, now: datetime) -> datetime:
    return now + timedelta(seconds=process.lease_seconds)


def _set_state(
    run: InstanceExec, state: ExecState, now: datetime, error: str = "", *, only_if: Q | None = None
) -> bool:
    """Finish a run with a conditional update: only a RUNNING run (meeting ``only_if``) can
    be finished. Returns whether this call finished it."""
    runs = InstanceExec.objects.filter(pk=run.pk, exec_state_id=ExecState.RUNNING)
    if only_if is not None:
        runs = runs.filter(only_if)
    if runs.update(exec_state_id=state, end_ts=now, error=error) != 1:
        return False
    _ended(run.pk, run.process_id, run.parent_id, state, error)
    return True


def _ended(
    run_id: int, process_id: int, parent_id: int | None, state: ExecState, error: str
) -> None:
    events.run_ended.send(
        sender=InstanceExec,
        run_id=run_id,
        process_id=process_id,
        parent_id=parent_id,
        state=state,
        error=error,
    )


def _started(run: InstanceExec) -> None:
    events.run_started.send(
        sender=InstanceExec, run_id=run.pk, process_id=run.process_id, parent_id=run.parent_id
    )


def _finish(run: InstanceExec, state: ExecState, now: datetime, error: str = "") -> None:
    if not _set_state(run, state, now, error):
        raise BdreError(Code.LEASE_LOST, f"run {run.pk} is no longer running")


def _fail_step_rows(run: InstanceExec, error: str, now: datetime) -> None:
    """term_step's writes to the queue: the step's claimed rows FAILED with the error."""
    batch_queue.mark_failed(run.target_batch_id, error=error, now=now, step_id=run.process_id)


def _fail_job_rows(job: Process, run: InstanceExec, error: str, now: datetime) -> None:
    """term_job's writes once its run is FAILED: its running steps FAILED, its claimed rows
    FAILED, and the dead letter for input that failed ``max_retries`` runs: every live row
    of a target batch whose runs failed that often (the batch failed as a whole, rows a
    step had finished included), and any row claimed that many times."""
    running_steps = InstanceExec.objects.filter(parent=run, exec_state_id=ExecState.RUNNING)
    step_error = f"job run failed: {error}"
    ending = list(running_steps.values_list("pk", "process_id"))
    running_steps.update(exec_state_id=ExecState.FAILED, end_ts=now, error=step_error)
    for step_run, step_id in ending:
        _ended(step_run, step_id, run.pk, ExecState.FAILED, step_error)
    batch_queue.mark_failed(run.target_batch_id, error=error, now=now)
    dead = batch_queue.dead_letter_tired(run.target_batch_id, max_retries=job.max_retries, now=now)
    if dead:
        queue_events.dead_lettered.send(
            sender=BatchConsumpQueue, queue_ids=dead, reason=error, by_hand=False
        )


# --- init_job -----------------------------------------------------------------------------


@transaction.atomic
def init_job(
    process_id: int,
    max_batch: int | None = None,
    *,
    worker: str | None = None,
    trigger: str = Trigger.MANUAL,
    force: bool = False,
) -> InitJobResult:
    """Start a run of a job: claim its steps' input and create its target batch. A paused
    job starts no run (116), unless a manual run is ``force``d (``schedules.hold``).

    One transaction; its row locks, in this order (the order ``batches.queue`` takes them
    too, a queue row only after its job): the job's row, then the queue rows the run takes,
    claimed with SKIP LOCKED or, on a re-run, those of its target batch updated in place."""
    job = Process.objects.get_live_job(process_id, lock=True)  # lock 1: the job's row (102)
    # Under the job's lock, which pause() takes too: a pause that returned holds every run
    # after it, and a run that got the lock first was started before the pause.
    schedules.hold(job.pk, manual=trigger == Trigger.MANUAL, force=force)  # 116
    graph = _validate(job, max_batch)  # 104, 110, 101
    rerun_batch_id = run_inputs.rerun_target(job, graph.consuming)
    now = timezone.now()
    # A re-run claims nothing new: it takes over its failed run's batch and rows.
    plan = [] if rerun_batch_id is not None else _plan_claims(graph)  # 109, 112
    if rerun_batch_id is not None:
        trigger = run_inputs.rerun_trigger(rerun_batch_id, trigger)
    run = _start_run(job, now, worker, rerun_batch_id, trigger)  # 104 if a concurrent call won
    if rerun_batch_id is not None:
        target_id = rerun_batch_id
        skipped = _reopen_target_batch(run, graph.steps, now)  # lock 2: its rows, updated
    else:
        target_id, skipped = _make_target_batch(job, run), set()
        _claim_input(plan, target_id, run, now, max_batch)  # lock 2: rows, SKIP LOCKED
    per_step, target_marking, sources = run_inputs.claimed(target_id, graph.steps, now)
    _check_claimed_all(plan, sources)  # 112 if a planned row was taken meanwhile
    _started(run)
    return InitJobResult(
        instance_exec_id=run.pk,
        target_batch_id=target_id,
        last_recoverable_sp_id=next((s.pk for s in graph.steps if s.pk not in skipped), None),
        target_batch_marking=target_marking,
        steps=per_step,
        is_rerun=rerun_batch_id is not None,
        skipped_step_ids=[s.pk for s in graph.steps if s.pk in skipped],
    )


@dataclass
class _JobGraph:
    """A job's steps in order and the upstream jobs each step consumes (none: a seed step)."""

    steps: list[Process]
    upstream_of: dict[int, set[int]]

    @property
    def consuming(self) -> list[Process]:
        return [s for s in self.steps if self.upstream_of[s.pk]]


@dataclass(frozen=True)
class _Claim:
    """What a consuming step claims: rows up to ``cut_id`` (a cut pattern's first match)
    or up to max_batch, and at least the oldest claimable row of each upstream."""

    step: Process
    upstream_ids: set[int]
    cut_id: int | None
    first_of_each_upstream: list[int]


def _validate(job: Process, max_batch: int | None) -> _JobGraph:
    """init_job's checks before it looks at the queue: 104, 110, 101 in this order."""
    if InstanceExec.objects.filter(process=job, exec_state_id=ExecState.RUNNING).exists():
        raise BdreError(Code.PARENT_ALREADY_RUNNING, f"{job.name} ({job.pk})")
    steps = steps_in_order(job)
    step_ids = [s.pk for s in steps]
    running_step = (
        InstanceExec.objects.filter(process_id__in=step_ids, exec_state_id=ExecState.RUNNING)
        .values_list("process__name", flat=True)
        .first()
    )
    if running_step:
        raise BdreError(Code.SUB_PROCESS_RUNNING, running_step)
    upstream_of: dict[int, set[int]] = defaultdict(set)
    for step_id, upstream_id in Process.enqueuing_processes.through.objects.filter(
        from_process_id__in=step_ids
    ).values_list("from_process_id", "to_process_id"):
        upstream_of[step_id].add(upstream_id)
    graph = _JobGraph(steps, upstream_of)
    if max_batch is None and any(not s.batch_cut_pattern for s in graph.consuming):
        uncut = ", ".join(s.name for s in graph.consuming if not s.batch_cut_pattern)
        raise BdreError(Code.MAX_BATCH_NULL, f"steps without a cut pattern: {uncut}")
    if max_batch is not None and max_batch < 1:
        raise BdreError(Code.MAX_BATCH_NULL, f"max batch must be at least 1, got {max_batch}")
    return graph


def _plan_claims(graph: _JobGraph) -> list[_Claim]:
    """What each consuming step of a new run will claim, read before claiming: 109 when a
    step's cut pattern matches no queued batch, then 112 when a step has nothing claimable
    (or nothing from one of its upstream jobs)."""
    cuts: dict[int, int | None] = {}
    for step in graph.consuming:
        cuts[step.pk] = None
        if step.batch_cut_pattern:
            cuts[step.pk] = batch_queue.first_cut(step.pk, step.batch_cut_pattern)
            if cuts[step.pk] is None:
                raise BdreError(
                    Code.BATCHES_MISSING_FOR_CUT,
                    f"{step.name}: no queued batch matches {step.batch_cut_pattern!r}",
                )
    plan: list[_Claim] = []
    for step in graph.consuming:
        upstream_ids = sorted(graph.upstream_of[step.pk])
        firsts = batch_queue.first_claimable_per_upstream(step.pk, upstream_ids)
        missing = set(upstream_ids) - set(firsts)
        if missing or not batch_queue.has_claimable(step.pk):
            raise BdreError(
                Code.NO_BATCHES,
                f"{step.name}: nothing queued"
                + (f" from upstream {sorted(missing)}" if missing else ""),
            )
        plan.append(_Claim(step, graph.upstream_of[step.pk], cuts[step.pk], list(firsts.values())))
    return plan


def _start_run(
    job: Process, now: datetime, worker: str | None, target_batch_id: int | None, trigger: str
) -> InstanceExec:
    """The job's RUNNING instance, with its lease. The partial unique index on running
    instances backs the job's row lock up: a concurrent call that won it makes this 104."""
    try:
        with transaction.atomic():
            return InstanceExec.objects.create(
                process=job,
                start_ts=now,
                exec_state_id=ExecState.RUNNING,
                heartbeat_at=now,
                lease_expires_at=_lease(job, now),
                worker=worker if worker is not None else default_worker(),
                target_batch_id=target_batch_id,
                trigger=trigger,
            )
    except IntegrityError as exc:
        raise BdreError(Code.PARENT_ALREADY_RUNNING, f"{job.name} ({job.pk})") from exc


def _reopen_target_batch(run: InstanceExec, steps: list[Process], now: datetime) -> set[int]:
    """A re-run takes over its failed run's target batch and claimed rows: each row counts
    an attempt, and those of the steps it does not skip are ACCESSED again. Returns the
    steps it skips (they succeeded for this batch before)."""
    target_id = run.target_batch_id
    assert target_id is not None  # a re-run starts with its failed run's target batch
    Batch.objects.filter(pk=target_id).update(source_instance_exec=run)
    skipped = run_inputs.recovered_steps(steps, target_id)
    batch_queue.reopen(target_id, run_id=run.pk, skipped=skipped, now=now)
    return skipped


def _make_target_batch(job: Process, run: InstanceExec) -> int:
    """A new run's target batch, made by the run and recorded on it."""
    target = Batch.objects.create(
        source_instance_exec=run, bus_domain_id=job.bus_domain_id, batch_type="job"
    )
    InstanceExec.objects.filter(pk=run.pk).update(target_batch_id=target.pk)
    return target.pk


def _claim_input(
    plan: list[_Claim], target_id: int, run: InstanceExec, now: datetime, max_batch: int | None
) -> None:
    """Claim each consuming step's rows into the target batch, oldest first."""
    for claim in plan:
        batch_queue.claim(
            step_id=claim.step.pk,
            target_batch_id=target_id,
            run_id=run.pk,
            now=now,
            max_batch=max_batch,
            cut_id=claim.cut_id,
            first_of_each_upstream=claim.first_of_each_upstream,
        )


def _check_claimed_all(plan: list[_Claim], sources: dict[int, set[int]]) -> None:
    """The checks of ``_plan_claims`` ran before the claim; on PostgreSQL a row can be
    discarded or locked by a requeue in between (SKIP LOCKED passes it over). Never start a
    step without its input: give up the whole claim instead (112, the transaction rolls
    back)."""
    for claim in plan:
        step = claim.step
        missing = claim.upstream_ids - sources.get(step.pk, set())
        if not sources.get(step.pk) or missing:
            raise BdreError(
                Code.NO_BATCHES, f"{step.name}: its queued batches were taken meanwhile"
            )


# --- halt_job / term_job ------------------------------------------------------------------


@transaction.atomic
def halt_job(
    process_id: int, batch_marking: str | None = None, *, instance_exec_id: int | None = None
) -> None:
    """Finish a run successfully: queue its target batch for every downstream step and move
    the rows it consumed to the archive."""
    job = Process.objects.get_live_job(process_id, lock=True)
    run = _running(job, instance_exec_id, Code.PROCESS_NOT_RUNNING)
    step_runs = list(
        InstanceExec.objects.filter(parent=run)
        .order_by("process_id", "-id")
        .values_list("process_id", "exec_state_id", "process__name")
    )
    if any(state == ExecState.RUNNING for _, state, _ in step_runs):
        names = sorted({name for _, state, name in step_runs if state == ExecState.RUNNING})
        raise BdreError(Code.SUB_PROCESS_RUNNING, ", ".join(names))
    latest: dict[int, tuple[int, str]] = {}
    for step_id, state, name in step_runs:
        latest.setdefault(step_id, (state, name))
    failed = sorted(name for state, name in latest.values() if state in ExecState.failed())
    if failed:
        raise BdreError(Code.SUB_PROCESS_FAILED, ", ".join(failed))

    now = timezone.now()
    if run.target_batch_id is not None:
        # Write, audit, publish: what the steps wrote for the batch becomes what readers
        # see, with the rest of the run's end or not at all.
        partitions.publish(run.target_batch_id, job_run_id=run.pk, now=now)
    batch_queue.mark_processed(run.target_batch_id, now=now)
    if not batch_marking:
        batch_marking = _marking_of(run)
    # An ingesting job hands each file downstream as a batch of its own when it registers
    # it; its run's target batch carries nothing and is not queued.
    target_id = run.target_batch_id
    if target_id is not None:  # every run init_job started; a run without one has no rows
        if not job.steps.filter(deleted=False, process_type__job_kind="ingest.scan").exists():
            batch_queue.enqueue_for_downstream(
                job=job, batch_id=target_id, batch_marking=batch_marking, now=now
            )
            if job.property_value(days.GROUP, days.ON_LATER_DAY) == markings.CLOSE_ON_LATER_DAY:
                batch_queue.close_days(job, before=min(markings.days(batch_marking), default=None))
        batch_queue.archive(target_batch_id=target_id, now=now)
    _finish(run, ExecState.SUCCESS, now)


def _marking_of(run: InstanceExec) -> str:
    """A halting run's marking (:func:`batch_marking`), from the rows it claimed."""
    claimed = batch_queue.claimed_rows(run.target_batch_id).values_list("batch_marking", flat=True)
    assert run.target_batch_id is not None  # halt_job marks a run's batch
    return batch_marking(run.process_id, run.target_batch_id, run.start_ts, claimed)


def batch_marking(
    job_id: int, target_batch_id: int, started: datetime, claimed: Iterable[str]
) -> str:
    """The marking a job's run gives its batch: the days its steps said their output holds,
    or else what it claimed (``claimed``: their markings), or else the day it started."""
    # Every successful step run of the batch: a re-run skips the steps that succeeded before.
    given = InstanceExec.objects.filter(
        parent__process_id=job_id,
        parent__target_batch_id=target_batch_id,
        exec_state_id=ExecState.SUCCESS,
    )
    return (
        markings.union(given.values_list("batch_marking", flat=True))
        or markings.union(claimed)
        or timezone.localtime(started).date().isoformat()
    )


@transaction.atomic
def term_job(
    process_id: int, error: str | None = None, *, instance_exec_id: int | None = None
) -> None:
    """Fail a run: its claimed rows stay queued as FAILED for the next run (the re-run), or
    go to the dead letter after ``max_retries`` failed attempts."""
    job = Process.objects.get_live_job(process_id, lock=True)
    run = _running(job, instance_exec_id, Code.PROCESS_NOT_RUNNING)
    now = timezone.now()
    error = error or "terminated"
    _finish(run, ExecState.FAILED, now, error)
    _fail_job_rows(job, run, error, now)


# --- steps --------------------------------------------------------------------------------


@transaction.atomic
def init_step(
    sub_process_id: int, *, worker: str | None = None, instance_exec_id: int | None = None
) -> int:
    """Start a step of the running job; returns the step's instance exec id. A caller that
    names its job run (``instance_exec_id``) gets 115 if that run was reaped or replaced."""
    job, step = _lock_step(sub_process_id)
    job_run = _running(job, instance_exec_id, Code.PARENT_NOT_RUNNING)
    if InstanceExec.objects.filter(process=step, exec_state_id=ExecState.RUNNING).exists():
        raise BdreError(Code.SUB_PROCESS_ALREADY_RUNNING, f"{step.name} ({step.pk})")
    now = timezone.now()
    try:
        with transaction.atomic():
            run = InstanceExec.objects.create(
                process=step,
                parent=job_run,
                start_ts=now,
                exec_state_id=ExecState.RUNNING,
                heartbeat_at=now,
                lease_expires_at=_lease(step, now),
                worker=worker if worker is not None else default_worker(),
                target_batch_id=job_run.target_batch_id,
            )
    except IntegrityError as exc:
        raise BdreError(Code.SUB_PROCESS_ALREADY_RUNNING, f"{step.name} ({step.pk})") from exc
    _started(run)
    batch_queue.take_up(job_run.target_batch_id, step.pk, now=now)
    return run.pk


@transaction.atomic
def halt_step(sub_process_id: int, *, instance_exec_id: int | None = None) -> None:
    """Finish a step successfully: its claimed rows are PROCESSED."""
    _job, step = _lock_step(sub_process_id)
    run = _running(step, instance_exec_id, Code.SUB_PROCESS_NOT_RUNNING)
    now = timezone.now()
    batch_queue.mark_processed(run.target_batch_id, now=now, step_id=step.pk)
    _finish(run, ExecState.SUCCESS, now)


@transaction.atomic
def term_step(
    sub_process_id: int, error: str | None = None, *, instance_exec_id: int | None = None
) -> None:
    """Fail a step: its claimed rows are FAILED with the error, and retried by the next run."""
    _job, step = _lock_step(sub_process_id)
    run = _running(step, instance_exec_id, Code.SUB_PROCESS_NOT_RUNNING)
    now = timezone.now()
    error = error or "terminated"
    _finish(run, ExecState.FAILED, now, error)
    _fail_step_rows(run, error, now)


# --- leases -------------------------------------------------------------------------------


@transaction.atomic
def heartbeat(instance_exec_id: int) -> datetime:
    """Renew a running instance's lease; 115 if the reaper already expired it."""
    run = InstanceExec.objects.select_related("process").filter(pk=instance_exec_id).first()
    if run is None:
        raise BdreError(Code.PROCESS_NOT_RUNNING, f"run {instance_exec_id} does not exist")
    now = timezone.now()
    expires = _lease(run.process, now)
    changed = InstanceExec.objects.filter(
        pk=instance_exec_id, exec_state_id=ExecState.RUNNING
    ).update(heartbeat_at=now, lease_expires_at=expires)
    if changed != 1:
        raise BdreError(
            Code.LEASE_LOST,
            f"run {instance_exec_id} is {ExecState(run.exec_state_id).name}",
        )
    return expires


def _expired(now: datetime) -> Q:
    # NULL-safe: a running instance without a lease (written by hand or by an old client)
    # expires after the default lease from its last sign of life, never stays stuck.
    fallback = now - timedelta(seconds=settings.BDRE_DEFAULT_LEASE_SECONDS)
    silent = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=fallback)
    return Q(lease_expires_at__lt=now) | (
        Q(lease_expires_at__isnull=True, start_ts__lt=fallback) & silent
    )


def reap_expired(now: datetime | None = None) -> list[int]:
    """Terminate running instances whose lease expired, exactly as term_job (a job run) or
    term_step (a step run) would. Each in its own transaction; returns the reaped ids."""
    now = now or timezone.now()
    candidates = list(
        InstanceExec.objects.filter(_expired(now), exec_state_id=ExecState.RUNNING)
        # Job runs first: reaping one also fails its step runs, which are then skipped.
        .order_by(F("parent_id").asc(nulls_first=True), "id")
        .values_list("pk", flat=True)
    )
    reaped: list[int] = []
    for run_id in candidates:
        if _reap_one(run_id, now):
            reaped.append(run_id)
    return reaped


@transaction.atomic
def _reap_one(run_id: int, now: datetime) -> bool:
    run = InstanceExec.objects.select_related("process").get(pk=run_id)
    job_id = run.process.parent_id or run.process_id
    # The job's row lock orders the reaper with every other call on the job.
    job = Process.objects.select_for_update(no_key=True).get(pk=job_id)
    error = f"lease expired at {run.lease_expires_at or 'unknown'}; reaped at {now}"
    # The expiry is part of the update itself: a heartbeat that renewed the lease since the
    # scan (it does not take the job lock) wins, and the run is left alone.
    if not _set_state(run, ExecState.FAILED, now, error, only_if=_expired(now)):
        return False
    if run.parent_id is None:
        _fail_job_rows(job, run, error, now)
    else:
        _fail_step_rows(run, error, now)
    return True
