"""The batch queue: enqueue, requeue and discard dead letters. Each function is one
transaction. (A file registered into a new batch, and BDRE's GetFiles, are
:mod:`batches.file_batches`'.)

Every state change of a claimed row is a function here too, called by the job lifecycle
(``processes.lifecycle``) inside its own transactions, under its locks: :func:`claim`,
:func:`take_up`, :func:`mark_processed`, :func:`mark_failed`, :func:`dead_letter_tired`,
:func:`reopen` and :func:`archive`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.db import connection, transaction
from django.db.models import F, QuerySet, Subquery
from django.utils import timezone

from batches import events, markings
from batches.models import (
    CLAIMABLE_STATES,
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    BatchState,
)
from bdre.errors import BdreError, Code
from processes.models import ExecState, InstanceExec, Process

Queue = BatchConsumpQueue
CLAIMABLE = CLAIMABLE_STATES


def job_of(process_id: int) -> Process:
    """A live job; a step stands for its job (BDRE registers files from sub-processes)."""
    process = Process.objects.filter(pk=process_id, deleted=False).select_related("parent").first()
    if process is None:
        raise BdreError(Code.INVALID_PARENT_PROCESS, f"process {process_id} does not exist")
    parent = process.parent  # selected with the process: no query
    return parent if parent is not None else process


def downstream_steps(job: Process) -> list[int]:
    """The live steps that consume ``job``'s output batches."""
    return list(
        Process.objects.filter(enqueuing_processes=job, deleted=False)
        .order_by("id")
        .values_list("id", flat=True)
    )


@transaction.atomic
def enqueue(
    *, source_batch_id: int, source_process_id: int, process_id: int, batch_marking: str = ""
) -> BatchConsumpQueue:
    """Queue ``source_batch_id`` (produced by ``source_process_id``) for the step ``process_id``."""
    source = job_of(source_process_id)
    step = Process.objects.filter(pk=process_id, deleted=False, parent__isnull=False).first()
    if step is None:
        raise BdreError(Code.INVALID_SUB_PROCESS, f"process {process_id} is not a live step")
    if not Batch.objects.filter(pk=source_batch_id).exists():
        raise BdreError(Code.BATCH_NOT_QUEUED, f"batch {source_batch_id} does not exist")
    return Queue.objects.create(
        source_batch_id=source_batch_id,
        source_process=source,
        process=step,
        insert_ts=timezone.now(),
        batch_state_id=BatchState.NEW,
        batch_marking=batch_marking,
    )


def enqueue_for_downstream(
    *, job: Process, batch_id: int, batch_marking: str, now: datetime
) -> int:
    """One NEW row for every step downstream of ``job``: one query whatever the fan-out.

    A batch delivered again (rebuilt by a backfill, a rewind or a reprocess) is not queued
    as new where it was consumed already: the batch its consumer made of it is rebuilt
    instead (:func:`restore_claims`), from the same input, so that the consumer's output
    holds its rows once, and so on downstream. Where it still waits, it stays as it is:
    its consumer will read the rebuilt batch."""
    steps = downstream_steps(job)
    waiting = set(
        Queue.objects.filter(source_batch_id=batch_id, process_id__in=steps).values_list(
            "process_id", flat=True
        )
    )
    consumed = dict(
        ArchiveConsumpQueue.objects.filter(source_batch_id=batch_id, process_id__in=steps)
        .order_by("process_id", "-id")
        .values_list("process_id", "target_batch_id")
    )
    rows = [
        Queue(
            source_batch_id=batch_id,
            source_process=job,
            process_id=step_id,
            insert_ts=now,
            batch_state_id=BatchState.NEW,
            batch_marking=batch_marking,
        )
        for step_id in steps
        if step_id not in waiting and step_id not in consumed
    ]
    Queue.objects.bulk_create(rows)
    rebuilt = {t for s, t in consumed.items() if s not in waiting and t is not None}
    return len(rows) + restore_claims(sorted(rebuilt), now=now)


def close_days(job: Process, *, before: str | None) -> int:
    """Close every day before ``before`` (``YYYY-MM-DD``) that batches of ``job`` still wait
    in: the last waiting row of each such day, for each step downstream, gets ``EOD@<day>``
    on its marking, so that a step cut at ``EOD`` claims the day whole, once. A day closed
    already stays as it is. Returns how many rows it marked.

    A row is marked only while it is claimable (a conditional update): a claim that took
    the rows first took them without the close, and the next batch closes the day again."""
    if before is None or not markings.is_day(before):
        return 0
    waiting = (
        Queue.objects.filter(
            source_process=job,
            process_id__in=downstream_steps(job),
            batch_state_id__in=CLAIMABLE,
        )
        .order_by("id")
        .values_list("id", "process_id", "batch_marking")
    )
    last_of_day: dict[tuple[int, str], tuple[int, str]] = {}
    closed: set[tuple[int, str]] = set()
    for row_id, step_id, marking in waiting:
        day = max(markings.days(marking), default=None)
        if day is None or day >= before:
            continue
        last_of_day[(step_id, day)] = (row_id, marking)
        if markings.closes_a_day(marking, day):
            closed.add((step_id, day))
    marked = 0
    for (step_id, day), (row_id, marking) in last_of_day.items():
        if (step_id, day) in closed:
            continue
        marked += Queue.objects.filter(pk=row_id, batch_state_id__in=CLAIMABLE).update(
            batch_marking=markings.union([marking, markings.end_of_day(day)])
        )
    return marked


def restore_claims(target_batch_ids: Sequence[int], *, now: datetime) -> int:
    """Put the archived claims of these delivered target batches back in the live queue, as
    FAILED rows of the same target batch: the job's next run rebuilds each one from exactly
    the input it was built from (``processes.lifecycle`` takes the oldest target batch with
    live rows), replacing its own output partitions, with the same key in the
    deduplication manifest. Rows move (the archive keeps a row once it was consumed again).
    Returns how many rows were put back.

    Inside the caller's transaction. The archived rows are locked first: of two
    concurrent restores of one batch, the second finds nothing left to move."""
    if not target_batch_ids:
        return 0
    archived = list(
        ArchiveConsumpQueue.objects.select_for_update()
        .filter(target_batch_id__in=list(target_batch_ids))
        .order_by("id")
    )
    keys = {(a.source_batch_id, a.process_id) for a in archived}
    live = Queue.objects.filter(
        source_batch_id__in={s for s, _ in keys}, process_id__in={p for _, p in keys}
    ).values_list("source_batch_id", "process_id")
    if clash := keys & set(live):
        source, step = min(clash)
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            f"batch {source} is in step {step}'s queue already (waiting, failed or a dead "
            "letter): requeue or discard it first",
        )
    seen: set[tuple[int, int]] = set()
    rows = []
    for a in archived:
        if (a.source_batch_id, a.process_id) in seen:
            continue  # one row per batch and step, as in the live queue
        seen.add((a.source_batch_id, a.process_id))
        rows.append(
            Queue(
                source_batch_id=a.source_batch_id,
                target_batch_id=a.target_batch_id,
                insert_ts=a.insert_ts,
                source_process_id=a.source_process_id,
                process_id=a.process_id,
                batch_state_id=BatchState.FAILED,
                batch_marking=a.batch_marking,
                last_error=f"put back to be rebuilt ({now:%Y-%m-%d %H:%M:%S} UTC)",
            )
        )
    Queue.objects.bulk_create(rows)
    ArchiveConsumpQueue.objects.filter(pk__in=[a.pk for a in archived]).delete()
    return len(rows)


def _locked_row(queue_id: int) -> BatchConsumpQueue:
    """The row, locked after its job (the lifecycle's order of locks, so a requeue cannot
    slip between init_job's reading of a target batch's rows and its update of them); 110
    while a running job holds it (claimed, or failed by one of the run's steps and waiting
    for that step to be started again)."""
    job_id = Queue.objects.filter(pk=queue_id).values_list("process__parent_id", flat=True).first()
    if job_id is not None:
        Process.objects.select_for_update(no_key=True).filter(pk=job_id).first()
    row = Queue.objects.select_for_update().filter(pk=queue_id).first()
    if row is None:
        raise BdreError(Code.UNKNOWN_ROW, f"queue row {queue_id} does not exist")
    held = row.batch_state_id == BatchState.ACCESSED or (
        row.target_batch_id is not None
        and InstanceExec.objects.filter(
            target_batch_id=row.target_batch_id,
            parent__isnull=True,
            exec_state_id=ExecState.RUNNING,
        ).exists()
    )
    if held:
        raise BdreError(
            Code.SUB_PROCESS_RUNNING, f"queue row {queue_id} is claimed by a running job"
        )
    return row


@transaction.atomic
def requeue(queue_id: int) -> BatchConsumpQueue:
    """Give a dead-lettered (or failed) row another chance, with its attempts reset; the
    last error is kept for the record. A row claimed by a running job cannot be requeued.

    A row whose run never succeeded goes back with the whole claim it was part of: every
    dead or failed row of that target batch becomes FAILED on it again, so the job's next
    run rebuilds that same batch, exactly as a retry would (the same output partitions
    replaced, the same key in the deduplication manifest; a new batch would leave the
    failed attempt's output beside the new one, and the manifest would take the input's
    own events for duplicates of it). A row whose batch was delivered without it (it was
    discarded from a run that then succeeded) is queued afresh, as NEW."""
    row = _locked_row(queue_id)
    if row.batch_state_id not in (BatchState.DISCARDED, BatchState.FAILED):
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            f"queue row {queue_id} is {BatchState(row.batch_state_id).name}: only failed or "
            "discarded rows can be requeued",
        )
    retried = {
        "attempts": 0,
        "claimed_by": None,
        "start_ts": None,
        "end_ts": None,
        "discard_reason": "",
    }
    delivered = (
        row.target_batch_id is None
        or InstanceExec.objects.filter(
            target_batch_id=row.target_batch_id,
            parent__isnull=True,
            exec_state_id=ExecState.SUCCESS,
        ).exists()
    )
    if delivered:
        Queue.objects.filter(pk=row.pk).update(
            batch_state_id=BatchState.NEW, target_batch=None, **retried
        )
    else:
        Queue.objects.filter(
            target_batch_id=row.target_batch_id,
            batch_state_id__in=(BatchState.DISCARDED, BatchState.FAILED),
        ).update(batch_state_id=BatchState.FAILED, **retried)
    row.refresh_from_db()
    return row


@transaction.atomic
def discard(queue_id: int, reason: str, *, by: str = "") -> BatchConsumpQueue:
    """Move a waiting or failed row to the dead letter by hand. Its last error stays as it
    was (what it failed with is what an operator needs to know); who discarded it and why
    are recorded beside it, in ``discard_reason``."""
    row = _locked_row(queue_id)
    if row.batch_state_id not in CLAIMABLE:
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            f"queue row {queue_id} is {BatchState(row.batch_state_id).name}: only new or "
            "failed rows can be discarded",
        )
    why = reason.strip() or "no reason given"
    note = f"discarded by {by}: {why}" if by else f"discarded by hand: {why}"
    Queue.objects.filter(pk=row.pk).update(batch_state_id=BatchState.DISCARDED, discard_reason=note)
    events.dead_lettered.send(sender=Queue, queue_ids=[row.pk], reason=why, by_hand=True)
    row.refresh_from_db()
    return row


@dataclass(frozen=True)
class RowResult:
    """What a bulk requeue or discard did to one row: the row, or the error that refused it."""

    id: int
    row: BatchConsumpQueue | None = None
    error: BdreError | None = None


def unknown_row() -> BdreError:
    # No id in the message: a row of another team must read exactly as an id of no row.
    return BdreError(Code.UNKNOWN_ROW, "no such queue row")


def requeue_many(queue_ids: Sequence[int]) -> list[RowResult]:
    """:func:`requeue` row by row, each in its own transaction: a row that cannot be
    requeued (claimed by a running job, or not failed) is answered as such and the others
    are still requeued. The caller has checked the user may act on each id."""
    return [_each(pk, partial(requeue, pk)) for pk in queue_ids]


def discard_many(queue_ids: Sequence[int], reason: str, *, by: str = "") -> list[RowResult]:
    """:func:`discard` row by row, each in its own transaction (as :func:`requeue_many`)."""
    return [_each(pk, partial(discard, pk, reason, by=by)) for pk in queue_ids]


def _each(queue_id: int, act: Callable[[], BatchConsumpQueue]) -> RowResult:
    try:
        return RowResult(id=queue_id, row=act())
    except BdreError as exc:
        if exc.code == Code.UNKNOWN_ROW:
            exc = unknown_row()
        return RowResult(id=queue_id, error=exc)


@dataclass(frozen=True)
class Attempt:
    """One job run that worked on a queue row's claim."""

    run: int
    start_ts: datetime
    end_ts: datetime | None
    state: str
    trigger: str
    error: str


def attempt_history(rows: Sequence[BatchConsumpQueue]) -> dict[int, list[Attempt]]:
    """Each row's attempts, oldest first, in two queries whatever the number of rows.

    A claim puts a row into the target batch of the run that claims it, and every re-run of
    that batch takes the row again (``processes.lifecycle``): the row's attempts are the job
    runs of its target batch, up to the last run that claimed it (a row left as a dead
    letter is not in the batch's later runs). What is not recorded is not shown: a row
    requeued after its batch was delivered without it starts a new claim, and the runs of
    its earlier batch are no longer linked to it. A run's error is its step's for the
    row's step when that step failed, else the job run's own."""
    targets = {row.target_batch_id for row in rows if row.target_batch_id is not None}
    if not targets:
        return {row.pk: [] for row in rows}
    runs = list(
        InstanceExec.objects.filter(target_batch_id__in=targets, parent__isnull=True)
        .select_related("exec_state")
        .order_by("id")
    )
    step_errors = {
        (parent_id, process_id): error
        for parent_id, process_id, error in InstanceExec.objects.filter(
            parent_id__in=[run.pk for run in runs], exec_state_id=ExecState.FAILED
        )
        .exclude(error="")
        .values_list("parent_id", "process_id", "error")
    }
    history: dict[int, list[Attempt]] = {}
    for row in rows:
        history[row.pk] = [
            Attempt(
                run=run.pk,
                start_ts=run.start_ts,
                end_ts=run.end_ts,
                state=run.exec_state.name,
                trigger=run.trigger,
                error=step_errors.get((run.pk, row.process_id), run.error),
            )
            for run in runs
            if run.target_batch_id == row.target_batch_id
            and (row.claimed_by_id is None or run.pk <= row.claimed_by_id)
        ]
    return history


def claim(
    *,
    step_id: int,
    target_batch_id: int,
    run_id: int,
    now: datetime,
    max_batch: int | None,
    cut_id: int | None,
    first_of_each_upstream: Sequence[int],
) -> int:
    """Claim a step's claimable rows oldest first: up to ``max_batch`` rows, or every row up
    to ``cut_id`` (the first whose marking matches the cut pattern), plus the oldest row of
    each upstream. One UPDATE; on PostgreSQL the candidate rows are locked with SKIP LOCKED
    so a concurrent writer never gets the same row."""
    candidates = Queue.objects.filter(process_id=step_id, batch_state_id__in=CLAIMABLE)
    if cut_id is not None:
        candidates = candidates.filter(id__lte=cut_id)
    picked = candidates.order_by("id").select_for_update(skip_locked=True).values("id")
    if max_batch is not None and cut_id is None:
        picked = picked[:max_batch]
    claimed = {
        "target_batch_id": target_batch_id,
        "batch_state_id": BatchState.ACCESSED,
        "start_ts": now,
        "end_ts": None,
        "claimed_by_id": run_id,
        "attempts": F("attempts") + 1,
    }
    # Two statements rather than one with an OR: "id IN (subquery) OR id IN (...)" keeps
    # PostgreSQL from driving the update by the subquery's few rows and makes it read every
    # claimable row of the step instead.
    count = Queue.objects.filter(id__in=Subquery(picked)).update(**claimed)
    if first_of_each_upstream:
        count += (
            Queue.objects.filter(id__in=list(first_of_each_upstream))
            .filter(process_id=step_id, batch_state_id__in=CLAIMABLE)
            .update(**claimed)
        )
    return count


def has_claimable(step_id: int) -> bool:
    return Queue.objects.filter(process_id=step_id, batch_state_id__in=CLAIMABLE).exists()


def first_claimable_per_upstream(step_id: int, upstream_ids: Sequence[int]) -> dict[int, int]:
    """The oldest claimable row of a step from each upstream job that has one: one indexed
    lookup per upstream (a GROUP BY would read every claimable row)."""
    found = {}
    for upstream_id in upstream_ids:
        first = (
            Queue.objects.filter(
                process_id=step_id, source_process_id=upstream_id, batch_state_id__in=CLAIMABLE
            )
            .order_by("id")
            .values_list("id", flat=True)
            .first()
        )
        if first is not None:
            found[upstream_id] = first
    return found


def first_cut(step_id: int, pattern: str) -> int | None:
    """The oldest claimable row of a step whose marking matches the cut pattern (a regular
    expression searched in the marking), or None."""
    return (
        Queue.objects.filter(
            process_id=step_id, batch_state_id__in=CLAIMABLE, batch_marking__regex=pattern
        )
        .order_by("id")
        .values_list("id", flat=True)
        .first()
    )


_COLUMNS = (
    "source_batch_id",
    "target_batch_id",
    "insert_ts",
    "source_process_id",
    "process_id",
    "start_ts",
    "end_ts",
    "batch_state_id",
    "batch_marking",
    "attempts",
    "claimed_by_id",
    "last_error",
)


# --- a claim's rows through its runs (the lifecycle's transactions) ---------------------------


def claimed_rows(
    target_batch_id: int | None, step_id: int | None = None
) -> QuerySet[BatchConsumpQueue]:
    """The live rows claimed for a target batch (dead letters excluded), of one step or of
    all; none for a run without a target batch. A target batch is made by one job's run and
    kept by its re-runs, so its id alone selects them, on its own index."""
    if target_batch_id is None:  # not "IS NULL": those are rows no run claimed
        return Queue.objects.none()
    rows = Queue.objects.filter(target_batch_id=target_batch_id).exclude(
        batch_state_id=BatchState.DISCARDED
    )
    return rows if step_id is None else rows.filter(process_id=step_id)


def take_up(target_batch_id: int | None, step_id: int, *, now: datetime) -> None:
    """A step started in its run takes its rows: ACCESSED, or FAILED by an earlier start of
    it in the same run (after a term_step), ACCESSED again."""
    claimed_rows(target_batch_id, step_id).filter(
        batch_state_id__in=(BatchState.ACCESSED, BatchState.FAILED)
    ).update(batch_state_id=BatchState.ACCESSED, start_ts=now, end_ts=None)


def mark_processed(
    target_batch_id: int | None, *, now: datetime, step_id: int | None = None
) -> None:
    """ACCESSED rows PROCESSED: a step's when it halts, and at the job's halt those of the
    steps the workflow did not need to run (consumed with the job all the same)."""
    claimed_rows(target_batch_id, step_id).filter(batch_state_id=BatchState.ACCESSED).update(
        batch_state_id=BatchState.PROCESSED, end_ts=now
    )


def mark_failed(
    target_batch_id: int | None, *, error: str, now: datetime, step_id: int | None = None
) -> None:
    """ACCESSED rows FAILED with the error: a step's at its term, all at the job's."""
    claimed_rows(target_batch_id, step_id).filter(batch_state_id=BatchState.ACCESSED).update(
        batch_state_id=BatchState.FAILED, end_ts=now, last_error=error
    )


def dead_letter_tired(target_batch_id: int | None, *, max_retries: int, now: datetime) -> list[int]:
    """After a failed run: the dead letter for input that failed ``max_retries`` runs, every
    live row of the batch when it failed that often as a whole (rows a step had finished
    included), else any row claimed its own step's ``max_retries`` times. Returns their ids
    (the caller signals them once its state is written)."""
    rows = claimed_rows(target_batch_id)
    # Every run of a target batch counts an attempt on each of its live rows (those of steps
    # a re-run skips too), and a requeue sets them back to 0: the batch has failed this many
    # runs since it was claimed or last requeued.
    if rows.filter(attempts__gte=max_retries).exists():
        dead = list(rows.values_list("pk", flat=True))
        rows.update(batch_state_id=BatchState.DISCARDED, end_ts=now)
        return dead
    tired = rows.filter(batch_state_id=BatchState.FAILED, attempts__gte=F("process__max_retries"))
    dead = list(tired.values_list("pk", flat=True))
    tired.update(batch_state_id=BatchState.DISCARDED)
    return dead


def reopen(target_batch_id: int, *, run_id: int, skipped: set[int], now: datetime) -> None:
    """A re-run takes over its failed run's rows: each counts an attempt, and those of the
    steps it does not skip are ACCESSED again."""
    rebuilt = Queue.objects.filter(
        target_batch_id=target_batch_id,
        batch_state_id__in=(BatchState.FAILED, BatchState.PROCESSED, BatchState.ACCESSED),
    )
    rebuilt.update(claimed_by_id=run_id, attempts=F("attempts") + 1)
    rebuilt.exclude(process_id__in=skipped).update(
        batch_state_id=BatchState.ACCESSED, start_ts=now, end_ts=None
    )


def archive(*, target_batch_id: int, now: datetime) -> int:
    """Move the rows a job run consumed (the live rows of its target batch, which no other
    job's run ever uses) to the archive: an INSERT ... SELECT and a DELETE, two statements
    whatever the number of rows."""
    columns = ", ".join(_COLUMNS)
    quote = connection.ops.quote_name
    queue_table = quote(Queue._meta.db_table)
    # Dead letters stay in the queue, waiting for a requeue.
    where = "target_batch_id = %s AND batch_state_id <> %s"
    params = [target_batch_id, int(BatchState.DISCARDED)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(ArchiveConsumpQueue._meta.db_table)} "
            f"(queue_id, archived_ts, {columns}) "
            f"SELECT id, %s, {columns} FROM {queue_table} WHERE {where}",
            [now, *params],
        )
        cursor.execute(f"DELETE FROM {queue_table} WHERE {where}", params)
        return int(cursor.rowcount)
