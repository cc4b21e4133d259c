"""Exactly once under concurrency, with real parallel processes: on PostgreSQL (row locks,
SKIP LOCKED, the partial unique index) and on SQLite (immediate transactions serialise the
writers; the test database is a file so that processes share it).

The children are forked after closing the parent's connections, so each opens its own
connection to the test database: real sessions, real locks, no shared state.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState
from bdre.errors import BdreError, Code
from processes import lifecycle
from processes.models import ExecState, InstanceExec, Process, Trigger
from tests.helpers.concurrency import FORK, in_children, run_or_code
from tests.helpers.lifecycle import steps_of

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def queue_new_batches(upstream, steps, n: int) -> list[Batch]:
    """``n`` new batches of ``upstream``, queued for each of ``steps`` (bulk inserts)."""
    now = timezone.now()
    batches = Batch.objects.bulk_create([Batch(batch_type="file") for _ in range(n)])
    BatchConsumpQueue.objects.bulk_create(
        BatchConsumpQueue(
            source_batch=batch,
            source_process=upstream,
            process=step,
            insert_ts=now,
            batch_state_id=BatchState.NEW,
            batch_marking="2026-11-21",
        )
        for batch in batches
        for step in steps
    )
    return batches


def _init(job_id: int) -> tuple[str, int]:
    return run_or_code(lambda: lifecycle.init_job(job_id))


def test_eight_processes_init_one_job_exactly_one_wins_seven_get_104(make_job):
    job = make_job("contended")
    outcomes = in_children(_init, [(job.pk,)] * 8)
    runs = [value for kind, value in outcomes if kind == "run"]
    assert len(runs) == 1, outcomes
    assert outcomes.count(("code", Code.PARENT_ALREADY_RUNNING)) == 7
    assert list(InstanceExec.objects.filter(process=job).values_list("pk", flat=True)) == runs


def _consume(job_id: int, step_id: int) -> list[int]:
    """Run the job in a loop until its queue is empty; return the batch ids it consumed."""
    consumed: list[int] = []
    while True:
        try:
            result = lifecycle.init_job(job_id, 37)
        except BdreError as error:
            if error.code == Code.PARENT_ALREADY_RUNNING:
                time.sleep(0.005)
                continue
            if error.code == Code.NO_BATCHES:
                if not InstanceExec.objects.filter(
                    process_id=job_id, exec_state_id=ExecState.RUNNING
                ).exists():
                    return consumed
                time.sleep(0.005)
                continue
            raise
        lifecycle.init_step(step_id)
        lifecycle.halt_step(step_id)
        lifecycle.halt_job(job_id)
        consumed += result.steps[step_id].batch_ids


def test_four_jobs_consume_2000_upstream_batches_each_exactly_once(make_job):
    upstream = make_job("upstream")
    consumers = [make_job(f"consumer{i}", upstream=[upstream]) for i in range(4)]
    steps = [steps_of(job)[0] for job in consumers]
    batches = queue_new_batches(upstream, steps, 2000)
    # Two processes per job: they contend on the job (104) as well as on the queue.
    args = [(job.pk, step.pk) for job, step in zip(consumers, steps, strict=True)] * 2
    consumed = in_children(_consume, args)

    expected = sorted(b.pk for b in batches)
    for index, step in enumerate(steps):
        mine = consumed[index] + consumed[index + 4]
        assert sorted(mine) == expected  # every batch, none twice
        archived = ArchiveConsumpQueue.objects.filter(process=step)
        assert archived.count() == 2000
        assert archived.values("source_batch").distinct().count() == 2000
        assert set(archived.values_list("attempts", flat=True)) == {1}
    assert not BatchConsumpQueue.objects.filter(process__in=steps).exists()


def _crash_mid_run(job_id: int, step_id: int) -> None:
    connections.close_all()
    lifecycle.init_job(job_id, 100)
    lifecycle.init_step(step_id)
    os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-step: no halt, no term


def test_a_killed_run_is_reaped_and_its_rows_claimed_again_with_nothing_lost(make_job):
    upstream = make_job("upstream")
    job = make_job("fragile", upstream=[upstream], lease_seconds=60)
    (step,) = steps_of(job)
    batches = queue_new_batches(upstream, [step], 50)
    connections.close_all()
    child = FORK.Process(target=_crash_mid_run, args=(job.pk, step.pk))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL

    (dead,) = InstanceExec.objects.filter(process=job, exec_state_id=ExecState.RUNNING)
    assert set(BatchConsumpQueue.objects.values_list("batch_state_id", flat=True)) == {
        BatchState.ACCESSED
    }
    # Reaped as it would be once the lease ran out: the reaper's clock, not a wait.
    assert lifecycle.reap_expired(now=dead.lease_expires_at + timedelta(seconds=1)) == [dead.pk]

    result = lifecycle.init_job(job.pk, 100)
    assert result.is_rerun and result.target_batch_id == dead.target_batch_id
    assert sorted(result.steps[step.pk].batch_ids) == sorted(b.pk for b in batches)
    lifecycle.init_step(step.pk)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)
    archived = ArchiveConsumpQueue.objects.filter(process=step)
    assert sorted(archived.values_list("source_batch_id", flat=True)) == sorted(
        b.pk for b in batches
    )
    assert set(archived.values_list("attempts", flat=True)) == {2}
    assert not BatchConsumpQueue.objects.exists()


def _pause_held_open(job_id: int, locked, reached) -> None:
    """Pause the job, and commit only once the other process is about to take the job."""
    from processes import schedules

    connections.close_all()
    try:
        with transaction.atomic():
            schedules.pause(job_id)
            locked.set()
            assert reached.wait(60)
    finally:
        connections.close_all()


def _scheduled_run(job_id: int, locked, reached, outcomes) -> None:
    from processes import tasks

    connections.close_all()
    init_job = lifecycle.init_job

    def announced(*args, **kwargs):
        reached.set()
        return init_job(*args, **kwargs)

    lifecycle.init_job = announced  # this forked process's own module
    tasks.hand_on = lambda *args: None  # the run's steps are not this test's subject
    try:
        assert locked.wait(60)
        outcomes.put(run_or_code(lambda: tasks.start_run(job_id, trigger=Trigger.SCHEDULE)))
    finally:
        connections.close_all()


def test_a_pause_committed_while_a_scheduled_run_waits_for_the_job_holds_that_run(make_job):
    """The schedule's run reads the job unpaused, then waits for the job's lock, which the
    pause holds; the pause commits. The run must see the pause it waited for (116), as
    ``init_job`` checks it under the job's lock, not before."""
    job = make_job("paused-meanwhile")
    locked, reached, outcomes = FORK.Event(), FORK.Event(), FORK.Queue()
    connections.close_all()
    children = [
        FORK.Process(target=_pause_held_open, args=(job.pk, locked, reached)),
        FORK.Process(target=_scheduled_run, args=(job.pk, locked, reached, outcomes)),
    ]
    for child in children:
        child.start()
    outcome = outcomes.get(timeout=120)
    for child in children:
        child.join(60)
    assert [child.exitcode for child in children] == [0, 0]
    assert outcome == ("code", Code.JOB_PAUSED)
    assert not InstanceExec.objects.filter(process=job).exists()


def _locks_the_job_until(job_id: int, locked, release) -> None:
    """Hold the job's row lock as a trigger's run start does (``init_job``)."""
    connections.close_all()
    try:
        with transaction.atomic():
            Process.objects.get_live_job(job_id, lock=True)
            locked.set()
            assert release.wait(60)
    finally:
        connections.close_all()


@pytest.mark.postgres
def test_a_run_row_is_written_while_another_trigger_holds_the_jobs_lock(make_job):
    """A step's transaction inserts rows that reference the job (its runs, files, queue
    rows: a foreign-key check takes a KEY SHARE lock on the job's row) while a second trigger
    holds the job's lock and waits for a row that transaction holds. As FOR UPDATE, the
    job's lock blocked the insert: the two deadlocked (PostgreSQL killed the scan of
    tests/processes/test_scan_gate.py's parallel triggers). The lock is a mutex of the
    lifecycle's own calls, not of the rows that reference the job: FOR NO KEY UPDATE."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("needs DATABASE_URL=postgres://...")
    job = make_job("locked-meanwhile")
    locked, release = FORK.Event(), FORK.Event()
    connections.close_all()
    holder = FORK.Process(target=_locks_the_job_until, args=(job.pk, locked, release))
    holder.start()
    try:
        assert locked.wait(60)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '5s'")
            run = InstanceExec.objects.create(
                process=job, exec_state_id=ExecState.RUNNING, start_ts=timezone.now()
            )
    finally:
        release.set()
        holder.join(60)
    assert holder.exitcode == 0
    assert InstanceExec.objects.filter(pk=run.pk).exists()
