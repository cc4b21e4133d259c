"""``spark.shred``: enriched-event TSV into atomic events, contexts and self-describing
events, deduplicated (DESIGN.md section 6). Properties:

- ``shred.database`` (``default``), ``shred.atomic_table`` (``atomic_events``): where the
  atomic events go; bad rows go to ``<atomic_table>_bad``, each context and self-describing
  event schema to a table of its own (``com_acme_page_1``), and the contexts and
  self-describing events that cannot be read to ``<atomic_table>_bad_entities`` with their
  source file and line; every one of these tables gets the batch's partition, empty or not;
- ``dedup.in_batch_natural``, ``dedup.in_batch_synthetic``, ``dedup.cross_batch_natural``,
  ``dedup.cross_batch_synthetic``: ``true`` (default) or ``false``;
- ``dedup.manifest``: ``database`` (default), ``parquet`` or ``none``;
  ``dedup.manifest_name`` (``default``), ``dedup.ttl_days`` (180).

The column mapping, from the enriched fields of the files' folder to every table written, is
recorded as the run's lineage (``lineage.steps``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.utils import timezone
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.steps import StepLineage, Write, table_name
from processes.step_kinds import Counters, StepContext, register, shred
from processes.step_kinds.enriched_fields import FIELDS, JSON_FIELDS
from processes.step_kinds.manifest import Manifest, open_manifest
from processes.step_kinds.spark_io import (
    input_folders,
    readable_files,
    record_lineage,
    start,
    team_of,
    write_batch,
)
from processes.step_kinds.spark_session import get_spark

logger = logging.getLogger(__name__)

STRATEGIES = (
    "in_batch_natural",
    "cross_batch_natural",
    "in_batch_synthetic",
    "cross_batch_synthetic",
)


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
        dedup.get("manifest", "database"),
        spark,
        dedup.get("manifest_name", "default"),
        int(dedup.get("ttl_days", "180")),
        team_id=team_id,
    )


# Where an entity table's columns come from, in the entity's JSON column: its Iglu schema
# and its data; the event's id (a new one for a synthetic duplicate) and time.
_FROM_JSON = ("from_json",)
_ENTITY_FROM_JSON = {
    "schema_vendor": _FROM_JSON,
    "schema_name": _FROM_JSON,
    "schema_format": _FROM_JSON,
    "schema_version": _FROM_JSON,
    "ref_tree": _FROM_JSON,
    "data": _FROM_JSON,
}
_ENTITY_FROM_EVENT = {"root_id": ("event_id", ("dedup",)), "root_tstamp": ("collector_tstamp", ())}


def _entity_write(table: str, columns: list[str], folders: list[str], json: list[str]) -> Write:
    written = Write(table, columns)
    for folder in folders:
        for column, (source, through) in _ENTITY_FROM_EVENT.items():
            if column in columns:
                written.feed(folder, source, column, *through)
        for column, through in _ENTITY_FROM_JSON.items():
            if column in columns:
                for source in json:
                    written.feed(folder, source, column, *through)
    return written


def lineage(
    folders: list[str],
    database: str,
    tables: dict[str, list[str]],
    atomic_table: str,
    entity_sources: dict[str, list[str]],
) -> StepLineage:
    """The enriched fields of the files into the atomic table's columns of their names (a
    synthetic duplicate's ``event_id`` is a new one: ``dedup``), the raw line into the bad
    rows' ``line``, each entity table's columns from the JSON columns its entities came from
    (``entity_sources``), and the unreadable entities' from all three. ``tables`` is every
    table written with its columns."""
    named = {table: table_name(f"{database}.{table}") for table in tables}
    atomic = Write(named[atomic_table], tables[atomic_table])
    bad = Write(named[f"{atomic_table}_bad"], tables[f"{atomic_table}_bad"])
    bad_entities_table = f"{atomic_table}_bad_entities"
    bad_entities = _entity_write(
        named[bad_entities_table], tables[bad_entities_table], folders, list(JSON_FIELDS)
    )
    for folder in folders:
        for column in atomic.columns:
            atomic.feed(folder, column, column, *(("dedup",) if column == "event_id" else ()))
        for name in FIELDS:
            bad.feed(folder, name, "line", "unparsed")
        for source in JSON_FIELDS:
            bad_entities.feed(folder, source, "json")
            bad_entities.feed(folder, source, "reason", *_FROM_JSON)
    writes = [atomic, bad]
    for table, sources in sorted(entity_sources.items()):
        writes.append(_entity_write(named[table], tables[table], folders, sorted(sources)))
    writes.append(bad_entities)
    return StepLineage(
        f"spark.shred: enriched events of {', '.join(folders)} into "
        + ", ".join(w.target for w in writes),
        writes,
    )


def _models(entities: DataFrame) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
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


@register("spark.shred")
def spark_shred(context: StepContext) -> Counters:
    props = context.properties("shred")
    dedup = context.properties("dedup")
    database = props.get("database", "default")
    atomic_table = props.get("atomic_table", "atomic_events")
    enabled = {s: dedup.get(s, "true").lower() != "false" for s in STRATEGIES}
    if not context.files:
        empty: Counters = {"files": 0, "rows_in": 0, "rows_out": 0, "bad_rows": 0}
        return empty | {f"dup_{s}": 0 for s in STRATEGIES} | {"entities_out": 0, "bad_entities": 0}

    spark = get_spark()
    start(context, spark)
    raw = spark.read.text(readable_files(context)).select(
        "value", F.input_file_name().alias("source_file")
    )
    result = shred_and_dedupe(
        raw,
        run_id=context.target_batch_id,
        manifest=manifest_of(spark, dedup, enabled, team_of(context)),
        enabled=enabled,
    )
    counters = {"files": len(context.files), **result.counters}
    atomic = shred.atomic(result.events)
    write_batch(atomic, context, database, atomic_table)
    write_batch(
        result.bad, context, database, f"{atomic_table}_bad", comments="lines that failed to parse"
    )
    parsed = shred.all_entities(result.events).cache()
    entities = shred.entities(parsed)
    models, json_sources = _models(entities)
    # One write per model: every version of it (1-0-0 and 1-0-1) lands in its table at once,
    # each row with its schema_version. A write per version replaced the one before it.
    for table, schemas in sorted(models.items()):
        rows = entities.filter(
            F.concat_ws("/", "schema_vendor", "schema_name", "schema_version").isin(schemas)
        )
        write_batch(rows, context, database, table)
    tally = parsed.agg(
        F.count_if(F.col("_reason").isNull()).alias("good"),
        F.count_if(F.col("_reason").isNotNull()).alias("bad"),
    ).first()
    assert tally is not None  # an aggregate without groups has exactly one row
    counters["entities_out"], counters["bad_entities"] = int(tally["good"]), int(tally["bad"])
    # Written when empty too: a registered table is readable at any time.
    bad_entities = shred.bad_entities(parsed)
    write_batch(
        bad_entities,
        context,
        database,
        f"{atomic_table}_bad_entities",
        comments="contexts and self-describing events that could not be read",
    )
    folders = input_folders(context)
    record_lineage(
        context,
        "spark.shred",
        describe=lambda: lineage(
            folders,
            database,
            {
                atomic_table: atomic.columns,
                f"{atomic_table}_bad": result.bad.columns,
                f"{atomic_table}_bad_entities": bad_entities.columns,
            }
            | {table: entities.columns for table in models},
            atomic_table,
            json_sources,
        ),
    )
    counters["tables"] = len(models) + 3
    spark.catalog.clearCache()
    context.log("shred_summary", ", ".join(f"{k} {v}" for k, v in counters.items()), "spark")
    return counters
