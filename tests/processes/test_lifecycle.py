"""The job lifecycle of DESIGN.md section 4, through the Python API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches import file_batches, queue
from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState
from processes import lifecycle
from processes.models import ExecState, InstanceExec
from tests.helpers.factories import InstanceExecFactory
from tests.helpers.lifecycle import code_of, feed, landed, queued, run_job, run_marked, steps_of

# backends: conditional updates, row locks and constraints (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]
Queue = BatchConsumpQueue


# --- the two-job scenario -----------------------------------------------------------------


def test_two_jobs_fail_recover_and_archive(make_job):
    p1 = make_job("p1", steps=2)
    p2 = make_job("p2", steps=2, upstream=[p1])
    a, b = steps_of(p2)

    first = run_job(p1)
    assert set(first.steps) == {s.pk for s in steps_of(p1)}
    assert all(s.batch_ids == [0] and s.min_batch_id == 0 for s in first.steps.values())
    assert InstanceExec.objects.get(pk=first.instance_exec_id).exec_state_id == ExecState.SUCCESS
    for step in (a, b):
        (row,) = queued(step, BatchState.NEW)
        assert row.source_batch_id == first.target_batch_id
        assert row.source_process == p1

    failed = run_job(p2, max_batch=10, fail_step=b)
    assert failed.last_recoverable_sp_id == a.pk
    assert queued(a)[0].batch_state_id == BatchState.PROCESSED
    (b_row,) = queued(b)
    assert b_row.batch_state_id == BatchState.FAILED
    assert b_row.last_error == "step broke"
    assert b_row.target_batch_id == failed.target_batch_id
    job_run = InstanceExec.objects.get(pk=failed.instance_exec_id)
    assert job_run.exec_state_id == ExecState.FAILED
    assert job_run.error == "step broke"

    rerun = lifecycle.init_job(p2.pk, 10)
    assert rerun.is_rerun
    assert rerun.target_batch_id == failed.target_batch_id
    assert rerun.last_recoverable_sp_id == b.pk
    assert rerun.skipped_step_ids == [a.pk]
    assert rerun.steps[b.pk].batch_ids == [first.target_batch_id]
    b_row.refresh_from_db()
    assert b_row.batch_state_id == BatchState.ACCESSED
    assert b_row.attempts == 2
    assert b_row.claimed_by_id == rerun.instance_exec_id
    lifecycle.init_step(b.pk)
    lifecycle.halt_step(b.pk)
    lifecycle.halt_job(p2.pk)

    assert Queue.objects.filter(process__in=[a, b]).count() == 0
    archived = ArchiveConsumpQueue.objects.filter(target_batch_id=failed.target_batch_id)
    assert sorted(archived.values_list("process_id", flat=True)) == [a.pk, b.pk]
    assert set(archived.values_list("batch_state_id", flat=True)) == {BatchState.PROCESSED}
    target = Batch.objects.get(pk=rerun.target_batch_id)
    assert target.source_instance_exec_id == rerun.instance_exec_id


def test_result_of_init_job_has_every_field(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    feed(p1, ["2026-11-19", "EOD@2026-11-20"])
    result = lifecycle.init_job(p2.pk, 5, worker="w1")
    (step,) = steps_of(p2)
    data = result.as_dict()
    assert set(data) == {
        "instance_exec_id",
        "target_batch_id",
        "last_recoverable_sp_id",
        "target_batch_marking",
        "steps",
        "is_rerun",
        "skipped_step_ids",
    }
    assert set(data["steps"][str(step.pk)]) == {
        "sub_process_id",
        "min_batch_id",
        "max_batch_id",
        "min_batch_marking",
        "max_batch_marking",
        "batch_ids",
        "files",
    }
    assert result.target_batch_marking == "2026-11-19,EOD@2026-11-20"
    assert result.steps[step.pk].min_batch_marking == "2026-11-19"
    # The dates themselves, as BDRE's InitJob gives them (min-batch-marking-map.125=2014-12-16);
    # the target marking keeps the labels.
    assert result.steps[step.pk].max_batch_marking == "2026-11-20"
    run = InstanceExec.objects.get(pk=result.instance_exec_id)
    assert run.worker == "w1"
    assert run.lease_expires_at > timezone.now() + timedelta(seconds=3500)
    assert run.target_batch_id == result.target_batch_id


def test_files_of_claimed_batches_are_returned(make_job):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest])
    created = timezone.now()
    b1 = file_batches.register_file(
        source_process_id=ingest.pk,
        path=landed(ingest, "1.txt"),
        file_size=10,
        file_hash="h1",
        creation_ts=created,
    )
    b2 = file_batches.register_file(
        source_process_id=ingest.pk,
        path=landed(ingest, "2.txt"),
        file_size=20,
        file_hash="h2",
        creation_ts=created,
    )
    result = lifecycle.init_job(load.pk, 10)
    (step,) = steps_of(load)
    got = result.steps[step.pk]
    assert got.batch_ids == [b1.pk, b2.pk]
    assert [(f.path, f.file_size, f.file_hash) for f in got.files] == [
        (landed(ingest, "1.txt"), 10, "h1"),
        (landed(ingest, "2.txt"), 20, "h2"),
    ]


# --- claiming -----------------------------------------------------------------------------


def test_max_batch_claims_oldest_first(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    batches = feed(p1, [f"2026-11-{d:02d}" for d in range(1, 6)])
    result = lifecycle.init_job(p2.pk, 2)
    (step,) = steps_of(p2)
    assert result.steps[step.pk].batch_ids == batches[:2]
    assert len(queued(step, BatchState.NEW)) == 3
    lifecycle.init_step(step.pk)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(p2.pk)
    assert lifecycle.init_job(p2.pk, 2).steps[step.pk].batch_ids == batches[2:4]


def test_cut_pattern_claims_up_to_and_including_the_first_match(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1], cut="^EOD@")
    batches = feed(
        p1, ["2026-11-20", "2026-11-20", "EOD@2026-11-20", "2026-11-21", "EOD@2026-11-21"]
    )
    (step,) = steps_of(p2)
    result = lifecycle.init_job(p2.pk)
    assert result.steps[step.pk].batch_ids == batches[:3]
    assert result.target_batch_marking == "2026-11-20,EOD@2026-11-20"
    lifecycle.init_step(step.pk)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(p2.pk)
    assert lifecycle.init_job(p2.pk).steps[step.pk].batch_ids == batches[3:]


def test_cut_pattern_is_checked_on_the_steps_own_rows(make_job):
    p1 = make_job("p1")
    cut = make_job("cut", upstream=[p1], cut="EOD")
    other = make_job("other", upstream=[p1])
    feed(p1, ["2026-11-20"])
    # Another step's row with a matching marking must not satisfy this step's cut.
    queue.enqueue(
        source_batch_id=0,
        source_process_id=p1.pk,
        process_id=steps_of(other)[0].pk,
        batch_marking="EOD@2026-11-20",
    )
    assert code_of(lifecycle.init_job, cut.pk) == 109


def test_the_first_batch_of_a_later_day_closes_the_days_before_it(make_job):
    shred = make_job("shred", properties={"run": {"close_days": "on_later_day"}})
    daily = make_job("daily", upstream=[shred], cut="EOD@")
    (step,) = steps_of(daily)
    first_day = [run_marked(shred, "2026-11-20") for _ in range(3)]
    assert code_of(lifecycle.init_job, daily.pk) == 109  # the day is still open
    run_marked(shred, "2026-11-21")
    assert [row.batch_marking for row in queued(step)] == [
        "2026-11-20",
        "2026-11-20",
        "2026-11-20,EOD@2026-11-20",
        "2026-11-21",
    ]
    assert run_job(daily).steps[step.pk].batch_ids == first_day  # the day, whole, once
    assert code_of(lifecycle.init_job, daily.pk) == 109

    # Two open days at once (a batch of the 21st, one of the 22nd): a batch of the 24th
    # closes both, each with its own last batch; a late batch of a closed day closes no day.
    run_marked(shred, "2026-11-22")
    run_marked(shred, "2026-11-20")
    run_marked(shred, "2026-11-24")
    assert [row.batch_marking for row in queued(step, BatchState.NEW)] == [
        "2026-11-21,EOD@2026-11-21",
        "2026-11-22,EOD@2026-11-22",
        "2026-11-20,EOD@2026-11-20",
        "2026-11-24",
    ]


def test_a_label_opens_and_closes_no_day(make_job):
    shred = make_job("shred", properties={"run": {"close_days": "on_later_day"}})
    daily = make_job("daily", upstream=[shred], cut="EOD@")
    run_marked(shred, "2026-11-20")
    run_marked(shred, "hourly")  # sorts after every date, and is none
    run_marked(shred, "EOD@2026-11-19,2026-11-20")  # closes the 19th, not the 20th
    assert [row.batch_marking for row in queued(steps_of(daily)[0])] == [
        "2026-11-20",
        "hourly",
        "EOD@2026-11-19,2026-11-20",
    ]


def test_a_rerun_keeps_the_marking_its_skipped_step_gave_the_batch(make_job):
    shred = make_job("shred", steps=2, properties={"run": {"close_days": "on_later_day"}})
    daily = make_job("daily", upstream=[shred], cut="EOD@")
    first, second = steps_of(shred)
    lifecycle.init_job(shred.pk)
    marked = lifecycle.init_step(first.pk)
    InstanceExec.objects.filter(pk=marked).update(batch_marking="2026-11-20")
    lifecycle.halt_step(first.pk)
    lifecycle.init_step(second.pk)
    lifecycle.term_step(second.pk, "broke")
    lifecycle.term_job(shred.pk, "broke")
    rerun = lifecycle.init_job(shred.pk)
    assert rerun.skipped_step_ids == [first.pk]
    lifecycle.init_step(second.pk)
    lifecycle.halt_step(second.pk)
    lifecycle.halt_job(shred.pk)
    assert [row.batch_marking for row in queued(steps_of(daily)[0])] == ["2026-11-20"]


def test_a_job_that_does_not_close_days_leaves_the_markings_as_its_steps_gave_them(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1], cut="EOD")
    run_marked(p1, "2026-11-20")
    run_marked(p1, "2026-11-21,2026-11-22")
    assert [row.batch_marking for row in queued(steps_of(p2)[0])] == [
        "2026-11-20",
        "2026-11-21,2026-11-22",
    ]


def test_a_step_with_several_upstreams_gets_one_row_of_each(make_job):
    left = make_job("left")
    right = make_job("right")
    join = make_job("join", upstream=[left, right])
    lefts = feed(left, ["2026-11-01", "2026-11-02", "2026-11-03"])
    (step,) = steps_of(join)
    assert code_of(lifecycle.init_job, join.pk, 1) == 112
    rights = feed(right, ["2026-11-04"])
    result = lifecycle.init_job(join.pk, 1)
    assert result.steps[step.pk].batch_ids == [lefts[0], rights[0]]


def test_min_and_max_markings_are_dates_and_the_target_marking_keeps_the_labels(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    feed(p1, ["z@2026-01-02", "a@2026-01-03,b@x@2026-01-01", "2026-01-02"])
    result = lifecycle.init_job(p2.pk, 10)
    (step,) = steps_of(p2)
    assert result.steps[step.pk].min_batch_marking == "2026-01-01"
    assert result.steps[step.pk].max_batch_marking == "2026-01-03"
    assert result.target_batch_marking == "b@x@2026-01-01,2026-01-02,z@2026-01-02,a@2026-01-03"


def test_halt_job_marks_downstream_rows_with_the_target_marking_by_default(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    p3 = make_job("p3", upstream=[p2])
    feed(p1, ["2026-11-01", "2026-11-02"])
    run_job(p2, max_batch=5)
    (row,) = queued(steps_of(p3)[0])
    assert row.batch_marking == "2026-11-01,2026-11-02"


def test_a_job_without_upstream_marks_its_batch_with_the_run_date(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    result = run_job(p1)
    assert result.target_batch_marking == timezone.localdate().isoformat()
    assert queued(steps_of(p2)[0])[0].batch_marking == timezone.localdate().isoformat()


def test_halt_job_leaves_rows_of_other_jobs_alone(make_job):
    p1 = make_job("p1")
    mine = make_job("mine", upstream=[p1])
    theirs = make_job("theirs", upstream=[p1])
    feed(p1, ["2026-11-01"])
    lifecycle.init_job(theirs.pk, 10)
    run_job(mine, max_batch=10)
    (their_row,) = queued(steps_of(theirs)[0])
    assert their_row.batch_state_id == BatchState.ACCESSED


# --- errors 101-115 -----------------------------------------------------------------------


def test_error_101_max_batch_null(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    feed(p1, ["2026-11-01"])
    assert code_of(lifecycle.init_job, p2.pk) == 101
    assert code_of(lifecycle.init_job, p2.pk, 0) == 101


def test_error_102_invalid_parent_process(make_job):
    p1 = make_job("p1")
    assert code_of(lifecycle.init_job, 999_999) == 102
    assert code_of(lifecycle.init_job, steps_of(p1)[0].pk) == 102
    assert code_of(lifecycle.halt_job, 999_999) == 102
    assert code_of(lifecycle.term_job, steps_of(p1)[0].pk) == 102
    p1.deleted = True
    p1.save()
    assert code_of(lifecycle.init_job, p1.pk) == 102


def test_error_103_invalid_sub_process(make_job):
    p1 = make_job("p1")
    for call in (lifecycle.init_step, lifecycle.halt_step, lifecycle.term_step):
        assert code_of(call, p1.pk) == 103
        assert code_of(call, 999_999) == 103


def test_error_104_second_init_job_gets_104(make_job):
    p1 = make_job("p1")
    lifecycle.init_job(p1.pk)
    assert code_of(lifecycle.init_job, p1.pk) == 104
    assert InstanceExec.objects.filter(process=p1).count() == 1


def test_error_105_halt_or_term_of_a_job_not_running(make_job):
    p1 = make_job("p1")
    assert code_of(lifecycle.halt_job, p1.pk) == 105
    assert code_of(lifecycle.term_job, p1.pk) == 105


def test_error_106_step_already_running(make_job):
    p1 = make_job("p1")
    lifecycle.init_job(p1.pk)
    lifecycle.init_step(steps_of(p1)[0].pk)
    assert code_of(lifecycle.init_step, steps_of(p1)[0].pk) == 106


def test_error_107_halt_or_term_of_a_step_not_running(make_job):
    p1 = make_job("p1")
    lifecycle.init_job(p1.pk)
    assert code_of(lifecycle.halt_step, steps_of(p1)[0].pk) == 107
    assert code_of(lifecycle.term_step, steps_of(p1)[0].pk) == 107


def test_error_108_step_of_a_job_not_running(make_job):
    p1 = make_job("p1")
    assert code_of(lifecycle.init_step, steps_of(p1)[0].pk) == 108


def test_error_109_no_batch_matches_the_cut_pattern(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1], cut="EOD")
    feed(p1, ["2026-11-01"])
    assert code_of(lifecycle.init_job, p2.pk) == 109


def test_error_110_a_step_is_running(make_job):
    p1 = make_job("p1")
    lifecycle.init_job(p1.pk)
    lifecycle.init_step(steps_of(p1)[0].pk)
    assert code_of(lifecycle.halt_job, p1.pk) == 110
    # A step left running by hand outside any job run blocks init_job.
    p2 = make_job("p2")
    InstanceExecFactory(process=steps_of(p2)[0], exec_state_id=ExecState.RUNNING)
    assert code_of(lifecycle.init_job, p2.pk) == 110


def test_error_111_a_step_failed(make_job):
    p1 = make_job("p1")
    lifecycle.init_job(p1.pk)
    lifecycle.init_step(steps_of(p1)[0].pk)
    lifecycle.term_step(steps_of(p1)[0].pk, "bad")
    assert code_of(lifecycle.halt_job, p1.pk) == 111


def test_a_step_that_failed_then_succeeded_lets_the_job_halt(make_job):
    p1 = make_job("p1")
    (step,) = steps_of(p1)
    lifecycle.init_job(p1.pk)
    lifecycle.init_step(step.pk)
    lifecycle.term_step(step.pk, "flaky")
    lifecycle.init_step(step.pk)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(p1.pk)


def test_error_112_nothing_queued(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    assert code_of(lifecycle.init_job, p2.pk, 5) == 112
    assert not InstanceExec.objects.filter(process=p2).exists()


def test_validation_order_104_before_110_before_101(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    InstanceExecFactory(process=steps_of(p2)[0], exec_state_id=ExecState.RUNNING)
    assert code_of(lifecycle.init_job, p2.pk) == 110
    InstanceExecFactory(process=p2, exec_state_id=ExecState.RUNNING)
    assert code_of(lifecycle.init_job, p2.pk) == 104


def test_validation_order_101_before_109_before_112(make_job):
    p1 = make_job("p1")
    cut = make_job("cut", upstream=[p1], cut="EOD")
    assert code_of(lifecycle.init_job, cut.pk) == 109
    plain = make_job("plain", upstream=[p1])
    assert code_of(lifecycle.init_job, plain.pk) == 101
    assert code_of(lifecycle.init_job, plain.pk, 3) == 112


def test_error_115_a_reaped_run_cannot_halt_or_term(make_job):
    p1 = make_job("p1", lease_seconds=60)
    (step,) = steps_of(p1)
    zombie = lifecycle.init_job(p1.pk)
    zombie_step = lifecycle.init_step(step.pk)
    later = timezone.now() + timedelta(seconds=120)
    # The job run is reaped; its running step is failed with it, not reaped on its own.
    assert lifecycle.reap_expired(later) == [zombie.instance_exec_id]
    replacement = lifecycle.init_job(p1.pk)
    assert replacement.is_rerun and replacement.target_batch_id == zombie.target_batch_id
    assert code_of(lifecycle.halt_step, step.pk, instance_exec_id=zombie_step) == 115
    assert code_of(lifecycle.halt_job, p1.pk, instance_exec_id=zombie.instance_exec_id) == 115
    assert code_of(lifecycle.term_job, p1.pk, instance_exec_id=zombie.instance_exec_id) == 115
    assert code_of(lifecycle.heartbeat, zombie.instance_exec_id) == 115
    replacement_run = InstanceExec.objects.get(pk=replacement.instance_exec_id)
    assert replacement_run.exec_state_id == ExecState.RUNNING  # nothing changed


# --- retries, dead letter, requeue --------------------------------------------------------


def test_a_row_is_discarded_after_max_retries_and_requeued_by_hand(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1], max_retries=2)
    feed(p1, ["2026-11-01"])
    (step,) = steps_of(p2)
    for attempt in (1, 2):
        run_job(p2, max_batch=1, fail_step=step)
        (row,) = queued(step)
        assert row.attempts == attempt
    assert row.batch_state_id == BatchState.DISCARDED
    assert row.last_error == "step broke"
    assert code_of(lifecycle.init_job, p2.pk, 1) == 112  # a dead letter is never claimed

    failed_target = row.target_batch_id

    queue.requeue(row.pk)
    row.refresh_from_db()
    # Back on the batch its runs failed to build, with its attempts reset: the next run
    # rebuilds that batch, as a retry would.
    assert (row.batch_state_id, row.attempts, row.last_error) == (
        BatchState.FAILED,
        0,
        "step broke",
    )
    assert row.target_batch_id == failed_target
    result = run_job(p2, max_batch=1)
    assert result.is_rerun and result.target_batch_id == failed_target
    assert ArchiveConsumpQueue.objects.filter(queue_id=row.pk).exists()


def test_a_requeued_batch_is_rebuilt_first_even_after_other_runs_and_gets_its_retries_again(
    make_job,
):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1], max_retries=2)
    (step,) = steps_of(p2)
    feed(p1, ["2026-11-01"])
    dead = run_job(p2, max_batch=1, fail_step=step).target_batch_id
    run_job(p2, max_batch=1, fail_step=step)
    (row,) = queued(step)
    assert row.batch_state_id == BatchState.DISCARDED
    later = feed(p1, ["2026-11-02"])
    delivered = run_job(p2, max_batch=1)
    assert not delivered.is_rerun and delivered.steps[step.pk].batch_ids == later

    queue.requeue(row.pk)
    feed(p1, ["2026-11-03"])
    failed_again = run_job(p2, max_batch=1, fail_step=step)
    assert failed_again.is_rerun and failed_again.target_batch_id == dead
    (row,) = [r for r in queued(step) if r.target_batch_id == dead]
    assert (row.batch_state_id, row.attempts) == (BatchState.FAILED, 1)  # not dead at once
    rebuilt = run_job(p2, max_batch=1)
    assert rebuilt.is_rerun and rebuilt.target_batch_id == dead
    assert rebuilt.steps[step.pk].batch_ids == [row.source_batch_id]
    after = run_job(p2, max_batch=1)  # then the new input, in a batch of its own
    assert not after.is_rerun and after.target_batch_id not in (dead, delivered.target_batch_id)


def test_every_failure_keeps_its_error(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", steps=2, upstream=[p1])
    feed(p1, ["2026-11-01"])
    a, b = steps_of(p2)
    lifecycle.init_job(p2.pk, 5)
    lifecycle.init_step(a.pk)
    lifecycle.term_step(a.pk, "disk full")
    lifecycle.term_job(p2.pk, "job gave up")
    assert queued(a)[0].last_error == "disk full"
    assert queued(b)[0].last_error == "job gave up"
    assert InstanceExec.objects.get(process=a).error == "disk full"


def test_a_rerun_redoes_a_succeeded_step_that_cannot_recover(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", steps=2, upstream=[p1], can_recover=False)
    feed(p1, ["2026-11-01"])
    a, b = steps_of(p2)
    run_job(p2, max_batch=5, fail_step=b)
    rerun = lifecycle.init_job(p2.pk, 5)
    assert rerun.last_recoverable_sp_id == a.pk
    assert rerun.skipped_step_ids == []
    assert {r.batch_state_id for r in queued(a) + queued(b)} == {BatchState.ACCESSED}


def test_recovery_of_a_job_without_upstream_keeps_its_target_batch(make_job):
    p1 = make_job("p1", steps=3)
    s1, s2, _s3 = steps_of(p1)
    failed = run_job(p1, fail_step=s2)
    rerun = lifecycle.init_job(p1.pk)
    assert rerun.is_rerun and rerun.target_batch_id == failed.target_batch_id
    assert rerun.skipped_step_ids == [s1.pk]
    assert rerun.last_recoverable_sp_id == s2.pk


def test_after_max_retries_failed_runs_the_whole_batch_goes_to_the_dead_letter(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", steps=2, upstream=[p1], max_retries=2)
    feed(p1, ["2026-11-01"])
    a, b = steps_of(p2)
    first = run_job(p2, max_batch=5, fail_step=b)
    assert {r.batch_state_id for r in queued(a)} == {BatchState.PROCESSED}
    second = run_job(p2, max_batch=5, fail_step=b)
    assert second.is_rerun and second.target_batch_id == first.target_batch_id
    # Rows step a had finished go with the batch: it failed as a whole.
    assert {r.batch_state_id for r in queued(a) + queued(b)} == {BatchState.DISCARDED}
    assert code_of(lifecycle.init_job, p2.pk, 5) == 112
    # One requeue brings the whole claim back, on its batch.
    queue.requeue(queued(b)[0].pk)
    assert {r.batch_state_id for r in queued(a) + queued(b)} == {BatchState.FAILED}
    rebuilt = run_job(p2, max_batch=5)
    assert rebuilt.is_rerun and rebuilt.target_batch_id == first.target_batch_id
    assert rebuilt.skipped_step_ids == [a.pk]


def test_a_failing_step_without_upstream_is_recovered_and_retried(make_job):
    """s1 reads upstream and succeeds, s2 reads nothing and fails: the re-run keeps the
    target batch, skips s1, and the retries are counted."""
    from processes.registry import StepSpec
    from tests.helpers.jobs import STEP_TYPE

    p1 = make_job("p1")
    p2 = make_job(
        "p2",
        [StepSpec("s1", STEP_TYPE, upstream=[p1.pk]), StepSpec("s2", STEP_TYPE)],
        max_retries=3,
    )
    feed(p1, ["2026-11-01"])
    s1, s2 = steps_of(p2)
    first = run_job(p2, max_batch=5, fail_step=s2)
    for attempt in (2, 3):
        rerun = run_job(p2, max_batch=5, fail_step=s2)
        assert rerun.is_rerun and rerun.target_batch_id == first.target_batch_id
        assert rerun.skipped_step_ids == [s1.pk]
        assert rerun.last_recoverable_sp_id == s2.pk
        assert (
            InstanceExec.objects.filter(process=p2, exec_state_id=ExecState.FAILED).count()
            == attempt
        )
    assert {r.batch_state_id for r in queued(s1)} == {BatchState.DISCARDED}


def test_a_rerun_leaves_dead_letters_out(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    batches = feed(p1, ["2026-11-01", "2026-11-02"])
    (step,) = steps_of(p2)
    failed = run_job(p2, max_batch=5, fail_step=step)
    dropped, kept = queued(step)
    queue.discard(dropped.pk, "corrupt")
    rerun = lifecycle.init_job(p2.pk, 5)
    assert rerun.target_batch_id == failed.target_batch_id
    assert rerun.steps[step.pk].batch_ids == [batches[1]]
    assert rerun.target_batch_marking == "2026-11-02"
    lifecycle.init_step(step.pk)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(p2.pk)
    (left,) = queued(step)
    assert (left.pk, left.batch_state_id) == (dropped.pk, BatchState.DISCARDED)
    assert list(ArchiveConsumpQueue.objects.values_list("queue_id", flat=True)) == [kept.pk]
    queue.requeue(dropped.pk)  # still there to be requeued


def test_recovery_resumes_after_the_last_recoverable_step(make_job):
    from processes.registry import StepSpec
    from tests.helpers.jobs import STEP_TYPE, build_job

    p1 = make_job("p1")
    job = build_job(
        p1.bus_domain,
        "chain",
        [
            StepSpec("a", STEP_TYPE, can_recover=False),
            StepSpec("b", STEP_TYPE, can_recover=True),
            StepSpec("c", STEP_TYPE),
            StepSpec("d", STEP_TYPE),
        ],
    )
    a, b, c, _d = steps_of(job)
    run_job(job, fail_step=c)
    rerun = lifecycle.init_job(job.pk)
    assert rerun.skipped_step_ids == [a.pk, b.pk]
    assert rerun.last_recoverable_sp_id == c.pk


def test_init_step_of_a_replaced_job_run_gets_115(make_job):
    p1 = make_job("p1", lease_seconds=60)
    (step,) = steps_of(p1)
    zombie = lifecycle.init_job(p1.pk)
    lifecycle.reap_expired(timezone.now() + timedelta(seconds=120))
    replacement = lifecycle.init_job(p1.pk)
    assert code_of(lifecycle.init_step, step.pk, instance_exec_id=zombie.instance_exec_id) == 115
    assert not InstanceExec.objects.filter(process=step).exists()
    lifecycle.init_step(step.pk, instance_exec_id=replacement.instance_exec_id)


def test_failed_rows_of_a_running_job_cannot_be_requeued_and_a_restarted_step_takes_them(
    make_job,
):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    feed(p1, ["2026-11-01"])
    (step,) = steps_of(p2)
    lifecycle.init_job(p2.pk, 5)
    lifecycle.init_step(step.pk)
    lifecycle.term_step(step.pk, "flaky")
    (row,) = queued(step)
    assert row.batch_state_id == BatchState.FAILED
    assert code_of(queue.requeue, row.pk) == 110
    assert code_of(queue.discard, row.pk, "no") == 110
    lifecycle.init_step(step.pk)
    row.refresh_from_db()
    assert row.batch_state_id == BatchState.ACCESSED
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(p2.pk)
    archived = ArchiveConsumpQueue.objects.get(queue_id=row.pk)
    assert archived.batch_state_id == BatchState.PROCESSED


def test_a_claim_that_comes_back_short_gives_up_with_112(make_job, monkeypatch):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    feed(p1, ["2026-11-01"])
    # As if a concurrent discard took the row between the checks and the claim.
    monkeypatch.setattr(queue, "claim", lambda **kwargs: 0)
    assert code_of(lifecycle.init_job, p2.pk, 5) == 112
    assert not InstanceExec.objects.filter(process=p2).exists()
    assert not Batch.objects.filter(batch_type="job", source_instance_exec__process=p2).exists()


# --- leases -------------------------------------------------------------------------------


def test_a_run_id_of_another_process_is_refused_and_changes_nothing(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2")
    mine = lifecycle.init_job(p1.pk)
    other = lifecycle.init_job(p2.pk)
    assert code_of(lifecycle.term_job, p1.pk, instance_exec_id=other.instance_exec_id) == 105
    run = InstanceExec.objects.get(pk=mine.instance_exec_id)
    assert run.exec_state_id == ExecState.RUNNING


def test_heartbeat_extends_the_lease(make_job):
    p1 = make_job("p1", lease_seconds=30)
    result = lifecycle.init_job(p1.pk)
    before = InstanceExec.objects.get(pk=result.instance_exec_id).lease_expires_at
    expires = lifecycle.heartbeat(result.instance_exec_id)
    assert expires >= before
    assert lifecycle.reap_expired(timezone.now() + timedelta(seconds=10)) == []


def test_reaper_terminates_expired_runs_as_term_job_does(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", steps=2, upstream=[p1], lease_seconds=5)
    feed(p1, ["2026-11-01"])
    a, _ = steps_of(p2)
    result = lifecycle.init_job(p2.pk, 5)
    step_run = lifecycle.init_step(a.pk)
    reaped = lifecycle.reap_expired(timezone.now() + timedelta(seconds=10))
    assert reaped == [result.instance_exec_id]
    job_run = InstanceExec.objects.get(pk=result.instance_exec_id)
    assert job_run.exec_state_id == ExecState.FAILED
    assert "lease expired" in job_run.error
    assert InstanceExec.objects.get(pk=step_run).exec_state_id == ExecState.FAILED
    assert {r.batch_state_id for r in Queue.objects.filter(process__parent=p2)} == {
        BatchState.FAILED
    }
    assert lifecycle.init_job(p2.pk, 5).is_rerun


def test_a_step_run_whose_lease_expired_is_reaped_as_term_step_does(make_job):
    """A step's worker died while the job's run lives on: the reaper fails the step run and
    the rows it claimed, leaves the job's run and the other step's rows alone, and the job
    then halts as after a failed step (111)."""
    p1 = make_job("p1")
    p2 = make_job("p2", steps=2, upstream=[p1], lease_seconds=600)
    feed(p1, ["2026-11-01"])
    a, b = steps_of(p2)
    result = lifecycle.init_job(p2.pk, 5)
    step_run = lifecycle.init_step(a.pk)
    now = timezone.now()
    InstanceExec.objects.filter(pk=step_run).update(lease_expires_at=now - timedelta(seconds=1))

    assert lifecycle.reap_expired(now) == [step_run]

    reaped = InstanceExec.objects.get(pk=step_run)
    assert reaped.exec_state_id == ExecState.FAILED
    assert "lease expired" in reaped.error
    job_run = InstanceExec.objects.get(pk=result.instance_exec_id)
    assert job_run.exec_state_id == ExecState.RUNNING
    assert {(r.batch_state_id, r.last_error) for r in Queue.objects.filter(process=a)} == {
        (BatchState.FAILED, reaped.error)
    }
    assert BatchState.FAILED not in {r.batch_state_id for r in Queue.objects.filter(process=b)}
    assert code_of(lifecycle.halt_job, p2.pk) == 111


def test_reaper_is_null_safe(make_job):
    p1 = make_job("p1")
    stale = InstanceExecFactory(
        process=p1,
        exec_state_id=ExecState.RUNNING,
        start_ts=timezone.now() - timedelta(hours=3),
        lease_expires_at=None,
    )
    fresh_job = make_job("p2")
    fresh = InstanceExecFactory(
        process=fresh_job, exec_state_id=ExecState.RUNNING, lease_expires_at=None
    )
    assert lifecycle.reap_expired() == [stale.pk]
    fresh.refresh_from_db()
    assert fresh.exec_state_id == ExecState.RUNNING


def test_a_heartbeat_that_comes_in_before_the_reaper_acts_wins(make_job):
    p1 = make_job("p1", lease_seconds=60)
    result = lifecycle.init_job(p1.pk)
    later = timezone.now() + timedelta(seconds=30)
    # The scan saw the run expired at ``later``; then the lease was renewed past it.
    InstanceExec.objects.filter(pk=result.instance_exec_id).update(
        lease_expires_at=later - timedelta(seconds=1)
    )
    lifecycle.heartbeat(result.instance_exec_id)
    assert lifecycle._reap_one(result.instance_exec_id, later) is False
    run = InstanceExec.objects.get(pk=result.instance_exec_id)
    assert run.exec_state_id == ExecState.RUNNING


def test_reaper_leaves_live_runs_alone(make_job):
    p1 = make_job("p1")
    result = lifecycle.init_job(p1.pk)
    assert lifecycle.reap_expired() == []
    run = InstanceExec.objects.get(pk=result.instance_exec_id)
    assert run.exec_state_id == ExecState.RUNNING


# --- query counts -------------------------------------------------------------------------


def queries_of(call) -> int:
    with CaptureQueriesContext(connection) as ctx:
        call()
    return len(ctx.captured_queries)


def test_init_and_halt_job_queries_do_not_grow_with_queue_depth_or_max_batch(make_job):
    counts = {}
    for depth, max_batch in ((3, 2), (300, 250)):
        p1 = make_job(f"up{depth}")
        p2 = make_job(f"down{depth}", steps=2, upstream=[p1])
        now = timezone.now()
        for i in range(depth):
            file_batches.register_file(
                source_process_id=p1.pk,
                path=landed(p1, f"d{depth}/{i}"),
                file_size=1,
                file_hash=str(i),
                creation_ts=now,
            )
        init = queries_of(lambda p2=p2, m=max_batch: lifecycle.init_job(p2.pk, m))
        for step in steps_of(p2):
            lifecycle.init_step(step.pk)
            lifecycle.halt_step(step.pk)
        halt = queries_of(lambda p2=p2: lifecycle.halt_job(p2.pk))
        counts[depth] = (init, halt)
    assert counts[3] == counts[300]
    # halt_job: 16, one of them the partitions its steps wrote, to publish (none here).
    assert counts[3][0] <= 30 and counts[3][1] <= 16
