"""The cross-batch deduplication manifest: which (event id, fingerprint) pairs earlier runs
saw. Two backends with one contract:

``check_and_record(pairs, run_id, now)`` records the batch's pairs (``event_id``,
``event_fingerprint``, ``event_hash``, ``pair_hash``: ``shred.keyed_lines`` makes them) for
run ``run_id`` and returns the ``event_hash`` and ``pair_hash`` of the pairs that *other*
runs recorded within the TTL for the batch's event ids, with ``earlier``: whether that run
recorded it before this run first recorded anything.

``run_id`` is the target batch of the claim, which every attempt at the same input reuses
(a retry, a requeue of its dead letters, a reaper's re-run: ``lifecycle.init_job`` rebuilds
the batch), so no attempt ever sees its own pairs, and every attempt gives the output of
the first:

- a pair belongs to the run that recorded it first (natural duplicates: whoever has the
  pair keeps it, any other run drops it, whenever it comes);
- an event id another run recorded with another fingerprint makes a synthetic duplicate
  only if that run recorded it *earlier* than this run first did (``earlier``): a batch
  rebuilt after later batches ran keeps the ids it had, as a clean run in that order
  would, and the later batches' copies are the ones renamed;
- what an earlier attempt recorded is replaced by what this one records, with the time of
  the run's first record kept: a row left out of the batch since (discarded by hand) must
  not stay recorded under it, or it would be dropped when it is requeued on its own.

- ``DatabaseManifest``: a table in the metadata database (``EventManifest``). The insert that
  ignores conflicts is an atomic check-and-set: of two runs racing on one pair, one wins and
  the other sees it. Expired rows, and the run's own from an earlier attempt, are deleted
  (by indexed ranges) before the insert.
- ``ParquetManifest``: Parquet files partitioned by ``etl_date`` and ``run_id`` under the
  warehouse, for large volumes, holding each pair as its two 64-bit hashes (16 bytes, where
  the strings take 68) and the time of the run's first record. Only the date partitions
  within the TTL are read (older ones are deleted, never scanned), with a broadcast
  semi-join on the batch's id hashes; a run's own partitions are replaced when it runs
  again. The pairs of a batch are written as they come (after in-batch natural
  deduplication they are distinct already), less those another run recorded.

With both, the TTL counts from the first time a pair was seen: a repeat dropped as a
duplicate does not extend it, and neither does another attempt of the same run.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from batches.models import EventManifest
from batches.tables import team_warehouse
from processes.step_kinds.shred import HASHES, hashes_of
from processes.step_kinds.spark_shred import check_manifest_name

PAIR_SCHEMA = "event_id string, event_fingerprint string"
HASH_SCHEMA = "event_hash long, pair_hash long"
SEEN_SCHEMA = f"{HASH_SCHEMA}, earlier boolean"
# first_seen: the run's first record, in microseconds since the epoch (NULL in files written
# before it was kept: older than any run that asks).
FILE_SCHEMA = f"{HASH_SCHEMA}, first_seen long, etl_date string, run_id long"
CHUNK = 5_000
# A manifest file's partition folders, in the URI Spark lists it by.
PARTITION = re.compile(r"/etl_date=([^/]+)/run_id=(-?\d+)/")


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
        mine = EventManifest.objects.filter(manifest=self.name, run_id=run_id)
        first = mine.aggregate(first=Min("etl_time"))["first"]
        mine.delete()
        seen: list[tuple[str, str, bool]] = []
        chunk: list[tuple[str, str | None]] = []
        for row in pairs.select("event_id", "event_fingerprint").distinct().toLocalIterator():
            chunk.append((row[0], row[1]))
            if len(chunk) == CHUNK:
                seen += self._check_and_set(chunk, run_id, first, now)
                chunk = []
        if chunk:
            seen += self._check_and_set(chunk, run_id, first, now)
        pairs_seen = self.spark.createDataFrame(seen, f"{PAIR_SCHEMA}, earlier boolean")
        return pairs_seen.select(
            *hashes_of(F.col("event_id"), F.col("event_fingerprint")), "earlier"
        ).cache()

    @transaction.atomic
    def _check_and_set(
        self,
        chunk: list[tuple[str, str | None]],
        run_id: int,
        first: datetime | None,
        now: datetime,
    ) -> list[tuple[str, str, bool]]:
        EventManifest.objects.bulk_create(
            [
                EventManifest(
                    manifest=self.name,
                    event_id=e,
                    fingerprint=f,
                    run_id=run_id,
                    etl_time=first or now,
                )
                for e, f in chunk
                if f is not None  # a null fingerprint is never a duplicate
            ],
            ignore_conflicts=True,
        )
        return [
            (event_id, fingerprint, first is None or etl_time < first)
            for event_id, fingerprint, etl_time in EventManifest.objects.filter(
                manifest=self.name,
                event_id__in=list({e for e, _ in chunk}),
                etl_time__gte=now - self.ttl,
            )
            .exclude(run_id=run_id)
            .values_list("event_id", "fingerprint", "etl_time")
        ]


class ParquetManifest:
    def __init__(
        self,
        spark: SparkSession,
        name: str = "default",
        ttl_days: int = 180,
        *,
        root: Path | None = None,
    ):
        self.spark, self.ttl_days = spark, ttl_days
        self.root = str(root or settings.BDRE_WAREHOUSE / "manifests" / name)

    # The folders are listed and deleted through Spark's DataFrame and SQL API only (no
    # Hadoop FileSystem through the JVM): the same code runs in a classic session and in a
    # Spark Connect client's, which has no JVM.

    def _partitions(self) -> dict[str, set[int]]:
        """``{etl_date: {run_id}}`` of the partitions with files (a listing: nothing is
        read)."""
        try:
            files = (
                self.spark.read.schema(FILE_SCHEMA)
                .option("basePath", self.root)
                .parquet(f"{self.root}/etl_date=*")
                .inputFiles()
            )
        except AnalysisException as exc:
            if exc.getCondition() == "PATH_NOT_FOUND":  # no run recorded anything yet
                return {}
            raise
        found: dict[str, set[int]] = {}
        for file in files:
            match = PARTITION.search(file)
            if match:
                found.setdefault(unquote(match[1]), set()).add(int(match[2]))
        return found

    def _delete(self, etl_date: str, run_id: int | None = None) -> None:
        """Delete a date's partition, or one run's under it: a static overwrite of it with no
        rows, through a temporary view of the manifest's folder (Spark removes the
        partition's folder and writes none)."""
        view = f"bdre_manifest_{uuid.uuid4().hex}"
        self.spark.sql(
            f"CREATE TEMPORARY VIEW {view} ({FILE_SCHEMA}) USING parquet "
            f"OPTIONS (path {sql_string(self.root)}, partitionOverwriteMode 'static')"
        )
        try:
            if run_id is None:
                spec, values = f"etl_date = {sql_string(etl_date)}, run_id", "0L, 0L, 0L, 0L"
            else:
                spec, values = (
                    f"etl_date = {sql_string(etl_date)}, run_id = {int(run_id)}",
                    "0L, 0L, 0L",
                )
            self.spark.sql(
                f"INSERT OVERWRITE {view} PARTITION ({spec}) SELECT {values} WHERE false"
            )
        finally:
            self.spark.sql(f"DROP VIEW IF EXISTS {view}")

    def prune(self, now: datetime) -> list[str]:
        """Delete the date partitions older than the TTL; returns the dates kept."""
        cutoff = (now - timedelta(days=self.ttl_days)).date().isoformat()
        kept = []
        for date in sorted(self._partitions()):
            if date < cutoff:
                self._delete(date)
            else:
                kept.append(f"{self.root}/etl_date={date}")
        return kept

    def check_and_record(self, pairs: DataFrame, run_id: int, now: datetime) -> DataFrame:
        live = self.prune(now)
        seen = self.spark.createDataFrame([], SEEN_SCHEMA)
        first: int | None = None
        if live:
            # With the schema given, Spark opens no file footer to infer it (a job of its
            # own on every run).
            recorded = (
                self.spark.read.schema(FILE_SCHEMA).option("basePath", self.root).parquet(*live)
            )
            totals = recorded.filter(F.col("run_id") == run_id).agg(F.min("first_seen")).first()
            assert totals is not None  # an aggregate without groups has exactly one row
            first = totals[0]
            earlier = (
                F.lit(True)
                if first is None
                else F.coalesce(F.col("first_seen") < F.lit(first), F.lit(True))
            )
            # Two long columns are read and probed; the batch's id hashes are broadcast
            # (8 bytes an event).
            seen = (
                recorded.filter(F.col("run_id") != run_id)
                .join(F.broadcast(pairs.select("event_hash")), "event_hash", "left_semi")
                .select(*HASHES, earlier.alias("earlier"))
                .cache()
            )
            seen.count()  # read now, before this run's own partition is replaced below
        for date, runs in self._partitions().items():
            if run_id in runs:
                self._delete(date, run_id)
        if first is None:
            first = int(now.timestamp() * 1_000_000)
        # Under the date of the run's first record, which the TTL counts from.
        day = datetime.fromtimestamp(first / 1_000_000, UTC).date().isoformat()
        # Like the database's insert that ignores conflicts, a pair another run recorded is
        # not recorded again: the TTL counts from the first time a pair was seen.
        (
            pairs.filter(F.col("pair_hash").isNotNull())
            .select(*HASHES, F.lit(first).cast("long").alias("first_seen"))
            .join(F.broadcast(seen.select("pair_hash")), "pair_hash", "left_anti")
            # Straight into the run's partition folder: one date and one run, so no
            # partitioned write (which sorts the rows by partition first) is needed.
            .write.mode("overwrite")
            .parquet(f"{self.root}/etl_date={day}/run_id={run_id}")
        )
        return seen


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def open_manifest(
    kind: str, spark: SparkSession, name: str, ttl_days: int, *, team_id: int | None = None
) -> Manifest | None:
    """The manifest ``name`` of ``kind``; a team's own when ``team_id`` is given (what a
    step opens): two teams using the same name never see each other's events, which would
    drop one team's events as duplicates of the other's. The name is a plain word, since it
    becomes a folder: ``../`` would reach another team's manifest."""
    if kind in ("", "none"):
        return None
    check_manifest_name(name)
    if kind == "database":
        return DatabaseManifest(
            spark, name if team_id is None else f"team-{team_id}/{name}", ttl_days
        )
    if kind == "parquet":
        root = None if team_id is None else team_warehouse(team_id) / "manifests" / name
        return ParquetManifest(spark, name, ttl_days, root=root)
    raise ValueError(f"dedup.manifest must be database, parquet or none, got {kind!r}")
