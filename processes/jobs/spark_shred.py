"""``spark.shred``: enriched-event TSV into atomic events, contexts and self-describing
events, deduplicated (DESIGN.md section 6). Properties:

- ``shred.database`` (``default``), ``shred.atomic_table`` (``atomic_events``): where the
  atomic events go; bad rows go to ``<atomic_table>_bad``, each context and self-describing
  event schema to a table of its own (``com_acme_page_1``);
- ``dedup.in_batch_natural``, ``dedup.in_batch_synthetic``, ``dedup.cross_batch_natural``,
  ``dedup.cross_batch_synthetic``: ``true`` (default) or ``false``;
- ``dedup.manifest``: ``database`` (default), ``parquet`` or ``none``;
  ``dedup.manifest_name`` (``default``), ``dedup.ttl_days`` (180).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils import timezone
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from processes.jobs import Counters, JobContext, register, shred
from processes.jobs.manifest import Manifest, open_manifest
from processes.jobs.spark_io import spark_path, start, write_batch
from processes.jobs.spark_session import get_spark

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


def shred_and_dedupe(
    raw: DataFrame, *, run_id: int, manifest: Manifest | None, enabled: dict[str, bool]
) -> Shredded:
    """Parse and deduplicate raw lines (``value``, ``source_file``); counts every strategy.
    The runner below and the benchmark share it."""
    spark = raw.sparkSession
    counters: Counters = {f"dup_{s}": 0 for s in STRATEGIES}
    split = shred.split_lines(raw).cache()
    events, bad = shred.parse(raw, split=split)
    counters["bad_rows"] = bad.count()
    parsed = events.count()
    counters["rows_in"] = parsed + counters["bad_rows"]
    kept = events
    if enabled["in_batch_natural"]:
        kept = shred.dedupe_in_batch_natural(events).cache()
        counters["dup_in_batch_natural"] = parsed - kept.count()
    seen = spark.createDataFrame([], "event_id string, event_fingerprint string")
    if manifest is not None and (
        enabled["cross_batch_natural"] or enabled["cross_batch_synthetic"]
    ):
        seen = manifest.check_and_record(
            kept.select("event_id", "event_fingerprint"), run_id, timezone.now()
        ).cache()
    if enabled["cross_batch_natural"]:
        before = kept.count()
        kept = shred.drop_seen_in_other_runs(kept, seen).cache()
        counters["dup_cross_batch_natural"] = before - kept.count()
    flagged = shred.flag_synthetic(
        kept, seen if enabled["cross_batch_synthetic"] else seen.limit(0)
    )
    if not enabled["in_batch_synthetic"]:
        flagged = flagged.withColumn("_synthetic_in_batch", F.lit(False))
    out = shred.rewrite_synthetic(flagged, run_id).cache()
    totals = out.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.col("_synthetic_in_batch").cast("int")).alias("in_batch"),
        F.sum(F.col("_synthetic_cross_batch").cast("int")).alias("cross_batch"),
    ).first()
    counters["rows_out"] = int(totals["rows"])
    counters["dup_in_batch_synthetic"] = int(totals["in_batch"] or 0)
    counters["dup_cross_batch_synthetic"] = int(totals["cross_batch"] or 0)
    return Shredded(out, bad, counters)


def manifest_of(spark, dedup: dict[str, str], enabled: dict[str, bool]) -> Manifest | None:
    if not (enabled["cross_batch_natural"] or enabled["cross_batch_synthetic"]):
        return None
    return open_manifest(
        dedup.get("manifest", "database"),
        spark,
        dedup.get("manifest_name", "default"),
        int(dedup.get("ttl_days", "180")),
    )


@register("spark.shred")
def spark_shred(context: JobContext) -> Counters:
    props = context.properties("shred")
    dedup = context.properties("dedup")
    database = props.get("database", "default")
    atomic_table = props.get("atomic_table", "atomic_events")
    enabled = {s: dedup.get(s, "true").lower() != "false" for s in STRATEGIES}
    if not context.files:
        empty: Counters = {"files": 0, "rows_in": 0, "rows_out": 0, "bad_rows": 0}
        return empty | {f"dup_{s}": 0 for s in STRATEGIES} | {"entities_out": 0}

    spark = get_spark()
    start(context, spark)
    raw = spark.read.text([spark_path(f.path) for f in context.files]).select(
        "value", F.input_file_name().alias("source_file")
    )
    result = shred_and_dedupe(
        raw,
        run_id=context.target_batch_id,
        manifest=manifest_of(spark, dedup, enabled),
        enabled=enabled,
    )
    counters = {"files": len(context.files), **result.counters}
    write_batch(shred.atomic(result.events), context, database, atomic_table)
    write_batch(
        result.bad, context, database, f"{atomic_table}_bad", comments="lines that failed to parse"
    )
    entities = shred.entities(result.events).cache()
    tables = entities.select("schema_vendor", "schema_name", "schema_version").distinct().collect()
    for vendor, name, version in tables:
        rows = entities.filter(
            (F.col("schema_vendor") == vendor)
            & (F.col("schema_name") == name)
            & (F.col("schema_version") == version)
        )
        write_batch(rows, context, database, shred.table_name(vendor, name, version))
    counters["entities_out"] = entities.count()
    counters["tables"] = len(tables) + 2
    spark.catalog.clearCache()
    context.log("shred_summary", ", ".join(f"{k} {v}" for k, v in counters.items()), "spark")
    return counters
