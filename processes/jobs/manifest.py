"""The cross-batch deduplication manifest: which (event id, fingerprint) pairs earlier runs
saw. Two backends with one contract:

``check_and_record(pairs, run_id, now)`` records the batch's pairs (``event_id``,
``event_fingerprint``, ``event_hash``, ``pair_hash``: ``shred.keyed_lines`` makes them) for
run ``run_id`` and returns the ``event_hash`` and ``pair_hash`` of the pairs that *other*
runs recorded within the TTL for the batch's event ids. A re-run of the same target batch
(same ``run_id``) never sees its own pairs.

- ``DatabaseManifest``: a table in the metadata database (``EventManifest``). The insert that
  ignores conflicts is an atomic check-and-set: of two runs racing on one pair, one wins and
  the other sees it. Expired rows are deleted (by an indexed range) before the insert.
- ``ParquetManifest``: Parquet files partitioned by ``etl_date`` and ``run_id`` under the
  warehouse, for large volumes, holding each pair as its two 64-bit hashes (16 bytes, where
  the strings take 68). Only the date partitions within the TTL are read (older ones are
  deleted, never scanned), with a broadcast semi-join on the batch's id hashes; a run's own
  partitions are replaced when it runs again. The pairs of a batch are written as they
  come (after in-batch natural deduplication they are distinct already), less those another
  run recorded.

With both, the TTL counts from the first time a pair was seen: a repeat dropped as a
duplicate does not extend it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from django.conf import settings
from django.db import transaction
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from batches.models import EventManifest
from processes.jobs.shred import HASHES, hashes_of

PAIR_SCHEMA = "event_id string, event_fingerprint string"
HASH_SCHEMA = "event_hash long, pair_hash long"
FILE_SCHEMA = f"{HASH_SCHEMA}, etl_date string, run_id long"
CHUNK = 5_000


class Manifest(Protocol):
    def check_and_record(self, pairs: DataFrame, run_id: int, now: datetime) -> DataFrame: ...


class DatabaseManifest:
    def __init__(self, spark: SparkSession, name: str = "default", ttl_days: int = 180):
        self.spark, self.name, self.ttl = spark, name, timedelta(days=ttl_days)

    def prune(self, now: datetime) -> int:
        deleted, _ = EventManifest.objects.filter(
            manifest=self.name, etl_time__lt=now - self.ttl
        ).delete()
        return deleted

    def check_and_record(self, pairs: DataFrame, run_id: int, now: datetime) -> DataFrame:
        self.prune(now)
        seen: list[tuple[str, str]] = []
        chunk: list[tuple[str, str | None]] = []
        for row in pairs.select("event_id", "event_fingerprint").distinct().toLocalIterator():
            chunk.append((row[0], row[1]))
            if len(chunk) == CHUNK:
                seen += self._check_and_set(chunk, run_id, now)
                chunk = []
        if chunk:
            seen += self._check_and_set(chunk, run_id, now)
        pairs_seen = self.spark.createDataFrame(seen, PAIR_SCHEMA)
        return pairs_seen.select(*hashes_of(F.col("event_id"), F.col("event_fingerprint"))).cache()

    @transaction.atomic
    def _check_and_set(
        self, chunk: list[tuple[str, str | None]], run_id: int, now: datetime
    ) -> list[tuple[str, str]]:
        EventManifest.objects.bulk_create(
            [
                EventManifest(
                    manifest=self.name, event_id=e, fingerprint=f, run_id=run_id, etl_time=now
                )
                for e, f in chunk
                if f is not None  # a null fingerprint is never a duplicate
            ],
            ignore_conflicts=True,
        )
        return list(
            EventManifest.objects.filter(
                manifest=self.name,
                event_id__in=list({e for e, _ in chunk}),
                etl_time__gte=now - self.ttl,
            )
            .exclude(run_id=run_id)
            .values_list("event_id", "fingerprint")
        )


class ParquetManifest:
    def __init__(self, spark: SparkSession, name: str = "default", ttl_days: int = 180):
        self.spark, self.ttl_days = spark, ttl_days
        self.root = str(settings.BDRE_WAREHOUSE / "manifests" / name)
        jvm = spark._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self.fs = self._Path(self.root).getFileSystem(spark._jsc.hadoopConfiguration())

    def _date_dirs(self) -> list[tuple[str, str]]:
        root = self._Path(self.root)
        if not self.fs.exists(root):
            return []
        return [
            (s.getPath().getName().split("=", 1)[1], s.getPath().toString())
            for s in self.fs.listStatus(root)
            if s.isDirectory() and s.getPath().getName().startswith("etl_date=")
        ]

    def prune(self, now: datetime) -> list[str]:
        """Delete the date partitions older than the TTL; returns the dates kept."""
        cutoff = (now - timedelta(days=self.ttl_days)).date().isoformat()
        kept = []
        for date, path in self._date_dirs():
            if date < cutoff:
                self.fs.delete(self._Path(path), True)
            else:
                kept.append(path)
        return kept

    def check_and_record(self, pairs: DataFrame, run_id: int, now: datetime) -> DataFrame:
        live = self.prune(now)
        seen = self.spark.createDataFrame([], HASH_SCHEMA)
        if live:
            # Two long columns are read and probed; the batch's id hashes are broadcast
            # (8 bytes an event).
            seen = (
                # With the schema given, Spark opens no file footer to infer it (a job of
                # its own on every run).
                self.spark.read.schema(FILE_SCHEMA)
                .option("basePath", self.root)
                .parquet(*live)
                .filter(F.col("run_id") != run_id)
                .select(*HASHES)
                .join(F.broadcast(pairs.select("event_hash")), "event_hash", "left_semi")
                .cache()
            )
            seen.count()  # read now, before this run's own partition is replaced below
        for _date, path in self._date_dirs():
            own = self._Path(f"{path}/run_id={run_id}")
            if self.fs.exists(own):
                self.fs.delete(own, True)
        # Like the database's insert that ignores conflicts, a pair another run recorded is
        # not recorded again: the TTL counts from the first time a pair was seen.
        (
            pairs.filter(F.col("pair_hash").isNotNull())
            .select(*HASHES)
            .join(F.broadcast(seen.select("pair_hash")), "pair_hash", "left_anti")
            # Straight into the run's partition folder: one date and one run, so no
            # partitioned write (which sorts the rows by partition first) is needed.
            .write.mode("overwrite")
            .parquet(f"{self.root}/etl_date={now.date().isoformat()}/run_id={run_id}")
        )
        return seen


def open_manifest(kind: str, spark: SparkSession, name: str, ttl_days: int) -> Manifest | None:
    if kind in ("", "none"):
        return None
    if kind == "database":
        return DatabaseManifest(spark, name, ttl_days)
    if kind == "parquet":
        return ParquetManifest(spark, name, ttl_days)
    raise ValueError(f"dedup.manifest must be database, parquet or none, got {kind!r}")
