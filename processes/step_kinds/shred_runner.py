"""The Spark side of ``spark.shred`` (processes.step_kinds.spark_shred): parse and
deduplicate a batch's lines, open its manifest, and find the entity tables it writes. The
transforms are in :mod:`processes.step_kinds.shred`."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.utils import timezone
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from processes.step_kinds import Counters, StepContext, shred
from processes.step_kinds.manifest import Manifest, open_manifest
from processes.step_kinds.spark_io import readable_files, team_of
from processes.step_kinds.spark_shred import STRATEGIES

logger = logging.getLogger(__name__)


@dataclass
class Shredded:
    events: DataFrame  # deduplicated, with new ids for synthetic duplicates
    bad: DataFrame
    counters: Counters = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # time of each phase


def shred_and_dedupe(
    raw: DataFrame, *, run_id: int, manifest: Manifest | None, enabled: dict[str, bool]
) -> Shredded:
    """Parse and deduplicate raw lines (``value``, ``source_file``); counts every strategy.
    The runner below and the benchmark share it.

    The lines are cached once with their three key fields; every decision is taken on those
    narrow columns (a few shuffles of ids and fingerprints, never of the 131 fields), and the
    events are split out in the single pass that writes them.

    Every query planned here costs more than its data work (a 1 million line batch has a few
    tens of thousands of interesting lines): its plans are analysed, optimised and compiled
    to Java, and each stage is a Spark job. So the frames are left lazy, and only four
    actions run before the write: the count of the lines (which reads and keys them into the
    cache), the manifest's check, its record, and one query that takes every decision and
    counts them."""
    spark = raw.sparkSession
    with _uncompressed_cache(spark):
        return _shred_and_dedupe(raw, run_id=run_id, manifest=manifest, enabled=enabled)


@contextmanager
def _uncompressed_cache(spark: SparkSession) -> Iterator[None]:
    """Cache the frames the decisions are taken on without compressing them: they live for
    one run, and encoding a million lines' keys cost 2 of 6.8 s (measured). The setting is
    read when a cache is built, at the first action on it, so it holds while every such
    action runs and is put back after."""
    key = "spark.sql.inMemoryColumnarStorage.compressed"
    before = spark.conf.get(key)
    assert before is not None  # a setting with a default: Spark always has a value
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        try:
            spark.conf.set(key, before)
        except Exception:  # a dead session must not hide the run's own error
            logger.warning("could not put %s back to %s", key, before)


def _shred_and_dedupe(
    raw: DataFrame, *, run_id: int, manifest: Manifest | None, enabled: dict[str, bool]
) -> Shredded:
    spark = raw.sparkSession
    clock = Clock()
    keyed = shred.keyed_lines(raw).cache()
    # Counted first, and alone: every later query reads this cache. Left for the manifest's
    # check to fill, it was computed three times over, once by each broadcast that query
    # starts at the same time (9 s more on 1 million lines).
    totals = keyed.agg(
        F.count(F.lit(1)).alias("lines"), F.count_if(~F.col("_good")).alias("bad")
    ).first()
    assert totals is not None  # an aggregate without groups has exactly one row
    clock.lap("read and key the lines")
    good = shred.good_lines(keyed)
    in_batch = enabled["in_batch_natural"] or enabled["in_batch_synthetic"]
    cross_batch = manifest is not None and (
        enabled["cross_batch_natural"] or enabled["cross_batch_synthetic"]
    )
    no_ids = spark.createDataFrame([], "event_hash long")
    # Cached but not counted: the manifest's check or the decisions fill it as they go.
    repeated = shred.repeated_ids(good).cache() if in_batch else no_ids
    seen = spark.createDataFrame([], "event_hash long, pair_hash long, earlier boolean")
    if cross_batch and manifest is not None:  # cross_batch implies a manifest
        pairs = good.select(shred.ROW, *shred.KEYS, *shred.HASHES)
        if enabled["in_batch_natural"]:
            natural = shred.in_batch_natural_losers(shred.with_ids(good, repeated))
            pairs = shred.without(pairs, natural.cache())
        seen = manifest.check_and_record(shred.recorded_pairs(pairs), run_id, timezone.now())
        clock.lap("in-batch natural losers, manifest: check and record")
    relevant = shred.with_ids(good, repeated.unionByName(seen.select("event_hash")))
    decisions = shred.decide(
        relevant,
        seen,
        in_batch_natural=enabled["in_batch_natural"],
        cross_batch_natural=cross_batch and enabled["cross_batch_natural"],
        cross_batch_synthetic=cross_batch and enabled["cross_batch_synthetic"],
        in_batch_synthetic=enabled["in_batch_synthetic"],
    ).cache()
    counts = decisions.agg(
        *[F.count_if(F.col("_drop") == s).alias(s) for s in STRATEGIES[:2]],
        F.count_if(F.col("_drop").isNull() & F.col("_synthetic_in_batch")).alias(STRATEGIES[2]),
        F.count_if(F.col("_drop").isNull() & F.col("_synthetic_cross_batch")).alias(STRATEGIES[3]),
    ).first()
    assert counts is not None  # an aggregate without groups has exactly one row
    clock.lap("decisions and counts")
    counters: Counters = {f"dup_{s}": int(counts[s] or 0) for s in STRATEGIES}
    counters["bad_rows"] = int(totals["bad"])
    counters["rows_in"] = int(totals["lines"])
    counters["rows_out"] = (
        counters["rows_in"]
        - counters["bad_rows"]
        - counters["dup_in_batch_natural"]
        - counters["dup_cross_batch_natural"]
    )
    events = shred.apply_decisions(raw, decisions)
    return Shredded(events, shred.bad_rows(keyed), counters, clock.laps)


class Clock:
    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = now - self._last
        self._last = now


def manifest_of(
    spark: SparkSession, dedup: dict[str, str], enabled: dict[str, bool], team_id: int
) -> Manifest | None:
    if not (enabled["cross_batch_natural"] or enabled["cross_batch_synthetic"]):
        return None
    return open_manifest(
        dedup["manifest"],
        spark,
        dedup["manifest_name"],
        int(dedup["ttl_days"]),
        team_id=team_id,
    )


def models_of(entities: DataFrame) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The table of each model the entities hold, with the schemas (``vendor/name/version``)
    that land in it, and the JSON columns they came from (for the lineage: the same query, a
    few rows more)."""
    versions = entities.select(
        "schema_vendor", "schema_name", "schema_version", "source_column"
    ).distinct()
    models: dict[str, list[str]] = {}
    json_sources: dict[str, list[str]] = {}
    for vendor, name, version, column in versions.collect():
        table = shred.table_name(vendor, name, version)
        schemas = models.setdefault(table, [])
        if f"{vendor}/{name}/{version}" not in schemas:
            schemas.append(f"{vendor}/{name}/{version}")
        if column not in json_sources.setdefault(table, []):
            json_sources[table].append(column)
    return models, json_sources


def shred_files(
    context: StepContext, spark: SparkSession, dedup: dict[str, str], enabled: dict[str, bool]
) -> Shredded:
    """The claimed files' lines (checked as they are now, right before Spark reads them),
    parsed and deduplicated against the step's manifest."""
    raw = spark.read.text(readable_files(context)).select(
        "value", F.input_file_name().alias("source_file")
    )
    return shred_and_dedupe(
        raw,
        run_id=context.target_batch_id,
        manifest=manifest_of(spark, dedup, enabled, team_of(context)),
        enabled=enabled,
    )


def entity_counts(parsed: DataFrame) -> tuple[int, int]:
    """The entities read, and those that could not be."""
    tally = parsed.agg(
        F.count_if(F.col("_reason").isNull()).alias("good"),
        F.count_if(F.col("_reason").isNotNull()).alias("bad"),
    ).first()
    assert tally is not None  # an aggregate without groups has exactly one row
    return int(tally["good"]), int(tally["bad"])
