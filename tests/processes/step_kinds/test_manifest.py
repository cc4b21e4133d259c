"""Both manifest backends, side by side on the same pairs, give the same answers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from processes.step_kinds import shred
from processes.step_kinds.manifest import DatabaseManifest, ParquetManifest

pytestmark = pytest.mark.django_db
SCHEMA = "event_id string, event_fingerprint string"


@pytest.fixture
def manifests(spark, settings, tmp_path):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    return [DatabaseManifest(spark, "same", ttl_days=30), ParquetManifest(spark, "same", 30)]


def hashed(spark, pairs):
    frame = spark.createDataFrame(pairs, SCHEMA)
    return frame.select("*", *shred.hashes_of(frame.event_id, frame.event_fingerprint))


def answers(spark, manifests, pairs, run_id, now, *, earlier=False) -> list[set[tuple]]:
    """What each manifest says other runs recorded: the pairs' hashes, and with ``earlier``
    whether they recorded them before ``run_id`` first did."""
    frame = hashed(spark, pairs)
    columns = [*shred.HASHES, "earlier"] if earlier else shred.HASHES
    return [
        {tuple(r) for r in m.check_and_record(frame, run_id, now).select(*columns).collect()}
        for m in manifests
    ]


def expect(spark, pairs) -> set[tuple]:
    return {tuple(r) for r in hashed(spark, pairs).select(*shred.HASHES).collect()}


def test_both_backends_answer_alike_through_runs_reruns_and_expiry(spark, manifests):
    start = timezone.now() - timedelta(days=40)
    first = [("e1", "f1"), ("e2", "f2"), ("e3", None), ("e4", "f4")]
    db, parquet = answers(spark, manifests, first, 1, start)
    assert db == parquet == set()

    second = [("e1", "f1"), ("e2", "other"), ("e3", None), ("e5", "f5")]
    later = start + timedelta(days=5)
    db, parquet = answers(spark, manifests, second, 2, later)
    assert db == parquet == expect(spark, [("e1", "f1"), ("e2", "f2")])  # e3: no fingerprint

    db, parquet = answers(spark, manifests, second, 2, later)  # a re-run of run 2
    assert db == parquet == expect(spark, [("e1", "f1"), ("e2", "f2")])  # never its own

    third = [("e1", "f1"), ("e5", "f5"), ("e4", "f4")]
    expired_first = start + timedelta(days=31)  # run 1 is past the 30-day TTL, run 2 is not
    db, parquet = answers(spark, manifests, third, 3, expired_first)
    # Run 2's own pair only: the TTL of e1/f1 ran from run 1, which first saw it.
    assert db == parquet == expect(spark, [("e5", "f5")])


def test_an_attempt_replaces_what_an_earlier_attempt_of_its_run_recorded(spark, manifests):
    now = timezone.now()
    answers(spark, manifests, [("e1", "f1"), ("e2", "f2")], 1, now)
    # The run is rebuilt without the line of e2 (discarded by hand from its batch).
    answers(spark, manifests, [("e1", "f1")], 1, now)
    # e2 requeued on its own, in another run, is no duplicate: nothing delivered it.
    db, parquet = answers(spark, manifests, [("e1", "f1"), ("e2", "f2")], 2, now)
    assert db == parquet == expect(spark, [("e1", "f1")])


def test_a_run_rebuilt_after_later_runs_sees_their_pairs_as_later(spark, manifests):
    start = timezone.now()
    answers(spark, manifests, [("e1", "fa")], 1, start)
    # Run 2 comes later with another payload under e1: run 1 recorded it earlier.
    db, parquet = answers(
        spark, manifests, [("e1", "fb")], 2, start + timedelta(hours=1), earlier=True
    )
    ((event_hash, pair_hash),) = expect(spark, [("e1", "fa")])
    assert db == parquet == {(event_hash, pair_hash, True)}
    # Run 1 again (its dead letter requeued): run 2's pair is there, but recorded later.
    db, parquet = answers(
        spark, manifests, [("e1", "fa")], 1, start + timedelta(hours=2), earlier=True
    )
    ((event_hash, pair_hash),) = expect(spark, [("e1", "fb")])
    assert db == parquet == {(event_hash, pair_hash, False)}
