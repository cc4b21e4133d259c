"""Both manifest backends, side by side on the same pairs, give the same answers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from processes.jobs import shred
from processes.jobs.manifest import DatabaseManifest, ParquetManifest

pytestmark = pytest.mark.django_db
SCHEMA = "event_id string, event_fingerprint string"


@pytest.fixture
def manifests(spark, settings, tmp_path):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    return [DatabaseManifest(spark, "same", ttl_days=30), ParquetManifest(spark, "same", 30)]


def hashed(spark, pairs):
    frame = spark.createDataFrame(pairs, SCHEMA)
    return frame.select("*", *shred.hashes_of(frame.event_id, frame.event_fingerprint))


def answers(spark, manifests, pairs, run_id, now) -> list[set[tuple]]:
    frame = hashed(spark, pairs)
    return [{tuple(r) for r in m.check_and_record(frame, run_id, now).collect()} for m in manifests]


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
