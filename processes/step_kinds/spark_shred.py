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

import re

from lineage.models import QueryKind
from lineage.steps import StepLineage, Write, table_name
from processes.step_kinds import (
    Counters,
    Prop,
    RefusedProperty,
    StepContext,
    StepKind,
    Table,
    check_value,
    register,
)
from processes.step_kinds.enriched_fields import FIELDS, JSON_FIELDS

STRATEGIES = (
    "in_batch_natural",
    "cross_batch_natural",
    "in_batch_synthetic",
    "cross_batch_synthetic",
)


# Where an entity table's columns come from, in the entity's JSON column: its Iglu schema
# and its data; the event's id (a new one for a synthetic duplicate) and time.
_FROM_JSON = ("from_json",)
# What the days of a shred batch are: when the collector received its events.
DAY_COLUMN = "collector_tstamp"
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


def spark_shred(context: StepContext) -> Counters:
    from pyspark.sql import functions as F

    from processes.step_kinds import shred
    from processes.step_kinds.shred_runner import entity_counts, models_of, shred_files
    from processes.step_kinds.spark_io import days_written, input_folders, start, write_batch
    from processes.step_kinds.spark_session import get_spark

    props = context.properties("shred")
    dedup = context.properties("dedup")
    database, atomic_table = props["database"], props["atomic_table"]
    enabled = {s: dedup[s].lower() != "false" for s in STRATEGIES}
    if not context.files:
        empty: Counters = {"files": 0, "rows_in": 0, "rows_out": 0, "bad_rows": 0}
        return empty | {f"dup_{s}": 0 for s in STRATEGIES} | {"entities_out": 0, "bad_entities": 0}

    spark = get_spark()
    start(context, spark)
    result = shred_files(context, spark, dedup, enabled)
    counters = {"files": len(context.files), **result.counters}
    atomic = shred.atomic(result.events)
    written = write_batch(atomic, context, database, atomic_table)
    # The batch is marked with the days of its events: a job that closes days (the demo's
    # run.close_days) closes each day before them once a later day's batch comes.
    days = days_written(context, spark, written, DAY_COLUMN)
    # Its first and last day mark it (what closing days reads); a batch of many days would
    # outgrow the marking's column.
    context.mark_batch(",".join(sorted({days[0], days[-1]})) if days else "")
    write_batch(
        result.bad, context, database, f"{atomic_table}_bad", comments="lines that failed to parse"
    )
    parsed = shred.all_entities(result.events).cache()
    entities = shred.entities(parsed)
    models, json_sources = models_of(entities)
    # One write per model: every version of it (1-0-0 and 1-0-1) lands in its table at once,
    # each row with its schema_version. A write per version replaced the one before it.
    for table, schemas in sorted(models.items()):
        rows = entities.filter(
            F.concat_ws("/", "schema_vendor", "schema_name", "schema_version").isin(schemas)
        )
        write_batch(rows, context, database, table)
    counters["entities_out"], counters["bad_entities"] = entity_counts(parsed)
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
    context.record_lineage(
        lambda: lineage(
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


class RefusedManifestName(RefusedProperty):
    pass


MANIFEST_NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")


def check_manifest_name(name: str) -> None:
    """A deduplication manifest's name is a plain word: it becomes a folder of the team's
    (``../`` would reach another team's manifest) and a key in the database."""
    if not MANIFEST_NAME.fullmatch(name):
        raise RefusedManifestName(
            f"dedup.manifest_name must be 1 to 48 letters, digits, _ or -, got {name!r}"
        )


KIND = register(
    StepKind(
        "spark.shred",
        spark_shred,
        properties={
            "shred": {
                "database": Prop("default", "the database of every table written"),
                "atomic_table": Prop("atomic_events", "the atomic events' table (a name)"),
            },
            "dedup": {
                **{s: Prop("true", "deduplicate so: true or false") for s in STRATEGIES},
                "manifest": Prop(
                    "database", "where events seen are kept: database, parquet or none"
                ),
                "manifest_name": Prop("default", "the manifest's name (letters, digits, _ -)"),
                "ttl_days": Prop("180", "days an event is remembered"),
            },
        },
        writes=(
            Table("shred", "database", qualified=False),
            Table("shred", "atomic_table", qualified=False),
        ),
        query_kind=QueryKind.SPARK_SHRED,
        checks=(check_value("dedup", "manifest_name", check_manifest_name, skip_empty=False),),
        spark=True,
        accounts=True,
    )
)
