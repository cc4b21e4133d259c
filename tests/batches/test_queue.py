"""Tests of ``batches/queue.py``: registering files, reading a batch's files, discarding and
requeueing rows."""

from __future__ import annotations

import pytest
from django.utils import timezone

from batches import file_batches, queue
from batches.models import Batch, BatchState
from processes import lifecycle
from tests.helpers.lifecycle import code_of, feed, landed, queued, run_job, steps_of

# backends: the queue's conditional updates and ordering (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


def test_errors_113_and_114_from_files_between(make_job):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest])
    other = make_job("other")
    (step,) = steps_of(load)
    now = timezone.now()
    b1 = file_batches.register_file(
        source_process_id=ingest.pk,
        path=landed(ingest, "a"),
        file_size=1,
        file_hash="a",
        creation_ts=now,
    )
    b2 = file_batches.register_file(
        source_process_id=ingest.pk,
        path=landed(ingest, "b"),
        file_size=1,
        file_hash="b",
        creation_ts=now,
    )
    assert [
        f.path
        for f in file_batches.files_between(
            sub_process_id=step.pk, min_batch_id=b1.pk, max_batch_id=b2.pk
        )
    ] == [landed(ingest, "a"), landed(ingest, "b")]
    assert (
        code_of(
            file_batches.files_between,
            sub_process_id=step.pk,
            min_batch_id=b1.pk,
            max_batch_id=9999,
        )
        == 114
    )
    (other_step,) = steps_of(other)
    b3 = Batch.objects.create(batch_type="manual")
    queue.enqueue(source_batch_id=b3.pk, source_process_id=ingest.pk, process_id=other_step.pk)
    assert (
        code_of(
            file_batches.files_between,
            sub_process_id=step.pk,
            min_batch_id=b1.pk,
            max_batch_id=b3.pk,
        )
        == 113
    )
    assert (
        code_of(
            file_batches.files_between,
            sub_process_id=other_step.pk,
            min_batch_id=b1.pk,
            max_batch_id=b2.pk,
        )
        == 114
    )


def test_a_row_left_out_of_a_delivered_batch_is_requeued_as_new(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    feed(p1, ["2026-11-01", "2026-11-02"])
    (step,) = steps_of(p2)
    failed = run_job(p2, max_batch=5, fail_step=step)
    dropped, _kept = queued(step)
    queue.discard(dropped.pk, "corrupt", by="ops")
    delivered = run_job(p2, max_batch=5)
    assert delivered.target_batch_id == failed.target_batch_id
    dropped.refresh_from_db()
    # Its one attempt is the failed run: the run that delivered the batch did without it.
    (attempt,) = queue.attempt_history([dropped])[dropped.pk]
    assert (attempt.run, attempt.state) == (failed.instance_exec_id, "FAILED")
    assert attempt.error and dropped.last_error
    assert dropped.discard_reason == "discarded by ops: corrupt"
    queue.requeue(dropped.pk)
    dropped.refresh_from_db()
    assert (dropped.batch_state_id, dropped.target_batch_id) == (BatchState.NEW, None)
    fresh = run_job(p2, max_batch=5)
    assert not fresh.is_rerun and fresh.target_batch_id != failed.target_batch_id


def test_discard_by_hand_and_what_cannot_be_requeued(make_job):
    p1 = make_job("p1")
    p2 = make_job("p2", upstream=[p1])
    feed(p1, ["2026-11-01", "2026-11-02"])
    (step,) = steps_of(p2)
    first, second = queued(step)
    queue.discard(second.pk, "corrupt upstream file")
    second.refresh_from_db()
    assert second.batch_state_id == BatchState.DISCARDED
    assert second.last_error == ""  # it never failed: discarding writes no error
    assert second.discard_reason == "discarded by hand: corrupt upstream file"
    assert code_of(queue.requeue, first.pk) == 118  # NEW: nothing to requeue
    lifecycle.init_job(p2.pk, 5)
    assert code_of(queue.requeue, first.pk) == 110  # claimed by a running job
    assert code_of(queue.discard, first.pk, "x") == 110
    assert code_of(queue.requeue, 999_999) == 117
    assert code_of(queue.discard, second.pk, "again") == 118  # DISCARDED: nothing to discard


def test_enqueueing_a_batch_of_a_process_that_does_not_exist_is_102(make_job):
    (step,) = steps_of(make_job("p2"))
    batch = Batch.objects.create()
    assert code_of(queue.enqueue, source_batch_id=batch.pk, source_process_id=999_999,
                   process_id=step.pk) == 102  # fmt: skip
