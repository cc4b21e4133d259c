"""The sync: the metastore brought in line with the ``HiveTable`` rows, idempotently, in the
catalog's own Spark session, with BDRE's own DDL only (never a user's SQL)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from batches import partitions
from batches.locations import spark_path
from batches.models import HiveTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

from batches.catalog.metastore import (
    DATABASE,
    PROPERTY_LOCATION,
    PROPERTY_TABLE_ID,
    catalog_name,
    create_partitioned,
    put_partitions,
    qualified,
    quote,
    sql_string,
)

log = logging.getLogger(__name__)


# --- the sync -------------------------------------------------------------------------------


@dataclass
class SyncSummary:
    created: list[str] = field(default_factory=list)
    # Dropped and created again: moved, another id, other columns.
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # no HiveTable row any more
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why
    partitions: dict[str, list[str]] = field(default_factory=dict)  # name -> batch_id=<n>, ...
    added: dict[str, list[str]] = field(default_factory=dict)  # partitions new to the catalog
    removed: dict[str, list[str]] = field(default_factory=dict)  # partitions gone from it

    def record(self, name: str, before: list[str], after: list[str]) -> None:
        """The table's partitions after the sync, and which it added and removed."""
        self.partitions[name] = after
        added = [p for p in after if p not in before]
        removed = [p for p in before if p not in after]
        if added:
            self.added[name] = added
        if removed:
            self.removed[name] = removed

    def lines(self) -> list[str]:
        out = []
        for name in sorted(self.partitions):
            if name in self.created:
                what = "created"
            elif name in self.replaced:
                what = "replaced"
            else:
                what = "unchanged"
            change = [f"+{p}" for p in self.added.get(name, [])]
            change += [f"-{p}" for p in self.removed.get(name, [])]
            count = len(self.partitions[name])
            out.append(
                f"{name}: {what}, {count} partition{'s' * (count != 1)}"
                + (f" ({', '.join(change)})" if change else "")
            )
        out += [
            f"{name}: dropped (no table in BDRE any more; files untouched)" for name in self.dropped
        ]
        out += [f"{name}: skipped, {reason}" for name, reason in sorted(self.skipped.items())]
        return out


def _wanted(tables: Iterable[HiveTable], summary: SyncSummary) -> dict[str, HiveTable]:
    """The catalog name of each table to publish; a view, a table without location and a
    second table with the same catalog name (``a-b`` and ``a_b``) are skipped."""
    wanted: dict[str, HiveTable] = {}
    for table in sorted(tables, key=lambda t: t.pk):
        name = catalog_name(table)
        if table.type == HiveTable.TableType.VIEW:
            summary.skipped[name] = "a view: only tables with files are published"
        elif not table.location:
            summary.skipped[name] = "no location"
        elif name in wanted:
            summary.skipped[f"{name} (table {table.pk})"] = (
                f"the same catalog name as table {wanted[name].pk} ({wanted[name]})"
            )
        else:
            wanted[name] = table
    return wanted


def _catalog_tables(spark: SparkSession) -> dict[str, tuple[str, dict[str, str]]]:
    """The tables in the catalog's BDRE databases: name -> (table type, properties)."""
    found = {}
    for database in spark.catalog.listDatabases():
        if not DATABASE.fullmatch(database.name):
            continue
        for table in spark.catalog.listTables(database.name):
            name = f"{database.name}.{table.name}"
            rows = spark.sql(f"SHOW TBLPROPERTIES {qualified(name)}").collect()
            found[name] = (table.tableType or "", {r["key"]: r["value"] for r in rows})
    return found


def _partitions(spark: SparkSession, name: str) -> list[str]:
    rows = spark.sql(f"SHOW PARTITIONS {qualified(name)}").collect()
    return sorted((r[0] for r in rows), key=_partition_order)


def _partition_order(partition: str) -> tuple[int, str]:
    value = partition.rpartition("=")[2]
    return (int(value), "") if value.isdigit() else (sys.maxsize, partition)


def _files_schema(spark: SparkSession, location: str) -> str | None:
    """The schema Spark reads at ``location`` (the columns and the ``batch_id`` partition
    column, as the steps read the table), or None when there is no Parquet file yet."""
    from pyspark.errors import AnalysisException

    try:
        return spark.read.parquet(location).schema.simpleString()
    except AnalysisException:
        return None


def sync(spark: SparkSession, tables: Iterable[HiveTable]) -> SyncSummary:
    """Make the catalog's BDRE databases hold exactly ``tables`` (all of them, normally):
    each one an external Parquet table at its location, partitioned by ``batch_id`` as its
    folders are, with the metastore's partitions exactly the folders there are. Idempotent:
    a table already right is left as it is; a re-run's partition keeps its entry (its files
    were replaced in place); a removed folder's entry goes. A table whose catalog entry has
    another location, another id or another schema is dropped and created again; a table in
    a BDRE database that is no HiveTable any more is dropped. Only external tables are ever
    dropped, so no file is touched."""
    summary = SyncSummary()
    wanted = _wanted(tables, summary)
    existing = _catalog_tables(spark)
    for database in sorted({name.partition(".")[0] for name in wanted}):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
    for name, table in wanted.items():
        _sync_table(spark, name, table, existing.get(name), summary)
    for name, (table_type, _) in sorted(existing.items()):
        if name in wanted:
            continue
        if table_type.upper() != "EXTERNAL":
            summary.skipped[name] = f"a {table_type.lower()} table not made by BDRE: left alone"
            continue
        spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
        summary.dropped.append(name)
    _drop_empty_databases(spark, {name.partition(".")[0] for name in wanted})
    return summary


def _sync_table(
    spark: SparkSession,
    name: str,
    table: HiveTable,
    existing: tuple[str, dict[str, str]] | None,
    summary: SyncSummary,
) -> None:
    if table.batch_id_partition_col and partitions.tracked(table):
        _sync_published(spark, name, table, existing, summary)
        return
    location = spark_path(table.location)
    schema = _files_schema(spark, location)
    if schema is None and existing is None:
        summary.skipped[name] = f"no Parquet files at {table.location} yet"
        return
    before: list[str] = []
    if existing is not None:
        if _same(spark, name, table, existing, schema):
            before = _partitions(spark, name)
        elif schema is None:
            # Moved or reused id, and nothing at the new location to read a schema from.
            spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
            summary.dropped.append(name)
            summary.skipped[name] = f"no Parquet files at {table.location} yet"
            return
        else:
            spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
            summary.replaced.append(name)
            existing = None
    if existing is None:
        # Columns and the batch_id partition column are inferred from the folders, as the
        # steps read them; the properties say which BDRE table it is, for the next sync.
        spark.sql(
            f"CREATE TABLE {qualified(name)} USING parquet LOCATION {sql_string(location)} "
            f"TBLPROPERTIES ({sql_string(PROPERTY_TABLE_ID)} = {sql_string(str(table.pk))}, "
            f"{sql_string(PROPERTY_LOCATION)} = {sql_string(table.location)})"
        )
        if name not in summary.replaced:
            summary.created.append(name)
    else:
        summary.unchanged.append(name)
    if table.batch_id_partition_col and _is_partitioned(spark, name):
        # Adds the folders the metastore lacks and drops the entries whose folder is gone.
        spark.sql(f"MSCK REPAIR TABLE {qualified(name)} SYNC PARTITIONS")
        after = _partitions(spark, name)
    else:
        after = []
    summary.record(name, before, after)


def _sync_published(
    spark: SparkSession,
    name: str,
    table: HiveTable,
    existing: tuple[str, dict[str, str]] | None,
    summary: SyncSummary,
) -> None:
    """A table BDRE writes by attempts (``batches.partitions``): its catalog partitions are
    its published ones, each at its attempt's folder. A partition published again is
    pointed at its new folder in place, so that a notebook's query sees the old batch or the
    new one, never none."""
    column = table.batch_id_partition_col
    wanted = {p.batch_id: spark_path(p.location) for p in partitions.published(table)}
    if not wanted and existing is None:
        summary.skipped[name] = "no published partition yet"
        return
    schema = None
    if wanted:
        from pyspark.errors import AnalysisException

        try:
            schema = partitions.read(spark, table.location, sorted(wanted.values())).schema
        except AnalysisException as exc:
            # One table's missing files are that table's problem, said, not the sync's.
            summary.skipped[name] = f"its published partitions cannot be read: {exc.getMessage()}"
            return
    before: list[str] = []
    if existing is not None:
        if _same(spark, name, table, existing, schema.simpleString() if schema else None):
            before = _partitions(spark, name)
        else:
            spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
            if schema is None:
                summary.dropped.append(name)
                summary.skipped[name] = "no published partition yet"
                return
            summary.replaced.append(name)
            existing = None
    if existing is None:
        assert schema is not None
        create_partitioned(
            spark,
            name,
            schema,
            column=column,
            location=spark_path(table.location),
            properties={PROPERTY_TABLE_ID: str(table.pk), PROPERTY_LOCATION: table.location},
        )
        if name not in summary.replaced:
            summary.created.append(name)
    else:
        summary.unchanged.append(name)
    present = [int(p.rpartition("=")[2]) for p in before]
    put_partitions(spark, name, column, wanted, present)
    after = _partitions(spark, name)
    summary.record(name, before, after)


def _same(
    spark: SparkSession,
    name: str,
    table: HiveTable,
    existing: tuple[str, dict[str, str]],
    schema: str | None,
) -> bool:
    """Whether the catalog's entry is the table's: its id, its location, its columns (when
    there are files to read them from)."""
    _, properties = existing
    same = properties.get(PROPERTY_TABLE_ID) == str(table.pk) and (
        properties.get(PROPERTY_LOCATION) == table.location
    )
    if same and schema is not None:
        same = spark.table(qualified(name)).schema.simpleString() == schema
    return same


def _is_partitioned(spark: SparkSession, name: str) -> bool:
    database, _, table = name.partition(".")
    return any(c.isPartition for c in spark.catalog.listColumns(table, database))


def _drop_empty_databases(spark: SparkSession, wanted: set[str]) -> None:
    for database in spark.catalog.listDatabases():
        name = database.name
        if DATABASE.fullmatch(name) and name not in wanted and not spark.catalog.listTables(name):
            spark.sql(f"DROP DATABASE IF EXISTS {quote(name)}")


def sync_all(spark: SparkSession) -> SyncSummary:
    return sync(spark, HiveTable.objects.all())
