"""Snowplow-style shredding and deduplication as pure ``DataFrame -> DataFrame`` functions.

Input is the raw text of enriched-event files (``value``, ``source_file``). Lines are split
exactly on tabs (never with the CSV reader, which merges quoted fields); a line without 131
fields, or without an event id, goes to the bad rows with the reason. The deduplication
strategies (DESIGN.md section 6):

- in-batch natural: same ``event_id`` and ``event_fingerprint``: keep one, the smallest
  ``etl_tstamp`` then the smallest line; a null fingerprint is never a duplicate;
- cross-batch natural: the pair is in the manifest from another run within the TTL: dropped;
- in-batch synthetic: same ``event_id``, another fingerprint: every such event gets a new
  id, a hash of id, fingerprint and run (so a re-run gives the same ids), and a ``duplicate``
  context carrying ``originalEventId``;
- cross-batch synthetic: an ``event_id`` the manifest holds from another run with another
  fingerprint gets the same treatment.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from processes.jobs.enriched_fields import ATOMIC_FIELDS, FIELDS

DUPLICATE_SCHEMA = "iglu:com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0"
CONTEXTS_SCHEMA = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-1"
LINE = "_line"  # the raw line, kept through deduplication for stable tie-breaks
ORIGINAL_ID = "_original_event_id"


def split_lines(raw: DataFrame) -> DataFrame:
    """Each line's tab-separated parts and their number (the runner caches this: the events
    and the bad rows both come from it, so the files are read and split once)."""
    return raw.select(
        F.col("value"), F.col("source_file"), F.split(F.col("value"), "\t", -1).alias("_parts")
    ).withColumn("_n", F.size("_parts"))


def parse(raw: DataFrame, *, split: DataFrame | None = None) -> tuple[DataFrame, DataFrame]:
    """Split lines on tabs into the 131 named fields (empty strings as NULL). Returns the
    events (plus ``source_file`` and the raw line) and the bad rows (``line``,
    ``source_file``, ``reason``). ``split`` is ``split_lines(raw)`` when already made."""
    parts = split if split is not None else split_lines(raw)
    width_ok = F.col("_n") == len(FIELDS)
    id_ok = F.col("_parts")[FIELDS.index("event_id")] != ""
    events = parts.filter(width_ok & id_ok).select(
        *[
            F.when(F.col("_parts")[i] == "", None).otherwise(F.col("_parts")[i]).alias(name)
            for i, name in enumerate(FIELDS)
        ],
        F.col("source_file"),
        F.col("value").alias(LINE),
    )
    bad = parts.filter(~(width_ok & id_ok)).select(
        F.col("value").alias("line"),
        F.col("source_file"),
        F.when(
            ~width_ok,
            F.concat(
                F.lit(f"expected {len(FIELDS)} tab-separated fields, found "),
                F.col("_n").cast("string"),
            ),
        )
        .otherwise(F.lit("event_id is empty"))
        .alias("reason"),
    )
    return events, bad


def _repeated(events: DataFrame, keys: list[str]) -> DataFrame:
    """The key values that occur more than once, found on a narrow projection (only the keys
    are shuffled, never the 131 fields), flagged ``_repeated``."""
    return (
        events.groupBy(*keys)
        .count()
        .filter(F.col("count") > 1)
        .select(*keys, F.lit(True).alias("_repeated"))
    )


def dedupe_in_batch_natural(events: DataFrame) -> DataFrame:
    """One event of each (event_id, event_fingerprint), chosen deterministically. Only the
    few events whose pair repeats go through the window; the others pass straight on."""
    keys = ["event_id", "event_fingerprint"]
    with_fingerprint = events.filter(F.col("event_fingerprint").isNotNull())
    marked = with_fingerprint.join(F.broadcast(_repeated(with_fingerprint, keys)), keys, "left")
    order = Window.partitionBy(*keys).orderBy(F.col("etl_tstamp").asc_nulls_last(), F.col(LINE))
    survivors = (
        marked.filter(F.col("_repeated"))
        .withColumn("_rank", F.row_number().over(order))
        .filter(F.col("_rank") == 1)
        .drop("_rank")
    )
    return (
        marked.filter(F.col("_repeated").isNull())
        .unionByName(survivors)
        .drop("_repeated")
        .unionByName(events.filter(F.col("event_fingerprint").isNull()))
    )


def drop_seen_in_other_runs(events: DataFrame, seen_pairs: DataFrame) -> DataFrame:
    """Cross-batch natural: drop events whose (event_id, event_fingerprint) ``seen_pairs``
    holds (the manifest's pairs of other runs within the TTL). NULL never matches."""
    return events.join(
        F.broadcast(seen_pairs.select("event_id", "event_fingerprint").distinct()),
        ["event_id", "event_fingerprint"],
        "left_anti",
    )


def flag_synthetic(events: DataFrame, seen_ids: DataFrame) -> DataFrame:
    """Add ``_synthetic_in_batch`` (the id is shared with another event of the batch) and
    ``_synthetic_cross_batch`` (``seen_ids`` holds the id from another run)."""
    shared = _repeated(events, ["event_id"])
    seen = seen_ids.select("event_id").distinct().withColumn("_seen", F.lit(True))
    return (
        events.join(F.broadcast(shared), "event_id", "left")
        .join(F.broadcast(seen), "event_id", "left")
        .withColumn("_synthetic_in_batch", F.coalesce(F.col("_repeated"), F.lit(False)))
        .withColumn("_synthetic_cross_batch", F.coalesce(F.col("_seen"), F.lit(False)))
        .drop("_repeated", "_seen")
    )


def _uuid_from(digest: Column) -> Column:
    """Format 32 hex characters of a digest as a UUID."""
    return F.concat_ws(
        "-",
        F.substring(digest, 1, 8),
        F.substring(digest, 9, 4),
        F.substring(digest, 13, 4),
        F.substring(digest, 17, 4),
        F.substring(digest, 21, 12),
    )


def _with_duplicate_context(derived: Column, original: Column) -> Column:
    """``derived_contexts`` with a ``duplicate`` context appended to its data array."""
    context = F.concat(
        F.lit(f'{{"schema":"{DUPLICATE_SCHEMA}","data":{{"originalEventId":"'),
        original,
        F.lit('"}}'),
    )
    fresh = F.concat(F.lit(f'{{"schema":"{CONTEXTS_SCHEMA}","data":['), context, F.lit("]}"))
    opened = F.regexp_replace(derived, r"\]\s*\}\s*$", "")  # the array, still open
    return (
        F.when(derived.isNull(), fresh)
        .when(derived.rlike(r"\[\s*\]\s*\}\s*$"), F.concat(opened, context, F.lit("]}")))
        .otherwise(F.concat(opened, F.lit(","), context, F.lit("]}")))
    )


def rewrite_synthetic(events: DataFrame, run_id: int) -> DataFrame:
    """Give every flagged event a new id (a hash of id, fingerprint or line, and run) and a
    ``duplicate`` context with its original id; keep the original in ``_original_event_id``."""
    flagged = F.col("_synthetic_in_batch") | F.col("_synthetic_cross_batch")
    digest = F.sha2(
        F.concat_ws(
            "|",
            F.col("event_id"),
            F.coalesce(F.col("event_fingerprint"), F.sha2(F.col(LINE), 256)),
            F.lit(str(run_id)),
        ),
        256,
    )
    return (
        events.withColumn(ORIGINAL_ID, F.col("event_id"))
        .withColumn("event_id", F.when(flagged, _uuid_from(digest)).otherwise(F.col("event_id")))
        .withColumn(
            "derived_contexts",
            F.when(
                flagged, _with_duplicate_context(F.col("derived_contexts"), F.col(ORIGINAL_ID))
            ).otherwise(F.col("derived_contexts")),
        )
    )


def atomic(events: DataFrame) -> DataFrame:
    """The atomic events table: every field but the JSON ones."""
    return events.select(*ATOMIC_FIELDS)


_SCHEMA_RE = r"^iglu:([^/]+)/([^/]+)/([^/]+)/(\d+)-(\d+)-(\d+)$"


def _entities(events: DataFrame, column: str, ref: str) -> DataFrame:
    """The self-describing JSONs of one column, one row each, with their hierarchy."""
    if column == "unstruct_event":
        inner = F.get_json_object(F.col(column), "$.data")
        items = F.array(inner)
    else:
        items = F.from_json(F.get_json_object(F.col(column), "$.data"), ArrayType(StringType()))
    rows = events.filter(F.col(column).isNotNull()).select(
        F.col("event_id").alias("root_id"),
        F.col("collector_tstamp").alias("root_tstamp"),
        F.explode(items).alias("_entity"),
    )
    schema = F.get_json_object("_entity", "$.schema")
    return rows.select(
        F.regexp_extract(schema, _SCHEMA_RE, 1).alias("schema_vendor"),
        F.regexp_extract(schema, _SCHEMA_RE, 2).alias("schema_name"),
        F.regexp_extract(schema, _SCHEMA_RE, 3).alias("schema_format"),
        F.concat_ws(
            "-",
            F.regexp_extract(schema, _SCHEMA_RE, 4),
            F.regexp_extract(schema, _SCHEMA_RE, 5),
            F.regexp_extract(schema, _SCHEMA_RE, 6),
        ).alias("schema_version"),
        "root_id",
        "root_tstamp",
        F.lit("events").alias("ref_root"),
        F.concat(F.lit("events."), F.regexp_extract(schema, _SCHEMA_RE, 2)).alias("ref_tree"),
        F.lit("events").alias("ref_parent"),
        F.get_json_object("_entity", "$.data").alias("data"),
        F.lit(ref).alias("source_column"),
    )


def entities(events: DataFrame) -> DataFrame:
    """Every context, derived context and self-describing event of the events."""
    return (
        _entities(events, "contexts", "contexts")
        .unionByName(_entities(events, "derived_contexts", "derived_contexts"))
        .unionByName(_entities(events, "unstruct_event", "unstruct_event"))
    )


def table_name(vendor: str, name: str, version: str) -> str:
    """``com.acme`` / ``page`` / ``1-0-0`` -> ``com_acme_page_1`` (one table per model)."""
    model = version.split("-", 1)[0]
    return re.sub(r"[^a-z0-9_]", "_", f"{vendor}_{name}_{model}".lower())
