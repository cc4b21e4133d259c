"""``spark.export``: a registered table's partitions of this run to files or a database.
Properties (group ``export``): ``source_table`` (``db.table``), ``format`` (csv, parquet or
jdbc); for files ``location`` (a folder URI; each batch goes to ``batch_id=<id>`` below it,
replaced on a re-run); for jdbc ``jdbc_url``, ``jdbc_table``, ``jdbc_driver`` and the mode
(``append`` by default: the rows of the exported batches that an earlier attempt wrote, a
retry's or a reprocess's, are deleted first, so each row is in the table once; ``overwrite``
replaces the whole table). The column mapping, table to folder or database table, is
recorded as the run's lineage (``lineage.steps``)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from django.conf import settings

from batches.locations import StepLocations, spark_path
from lineage.models import QueryKind
from lineage.steps import StepLineage, Write, jdbc_name, table_name
from processes.step_kinds import (
    Counters,
    Prop,
    PropertyGroups,
    RefusedProperty,
    StepContext,
    StepKind,
    Table,
    register,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# How the databases BDRE_JDBC_DRIVERS names say that a table does not exist (Derby,
# PostgreSQL, MySQL and MariaDB, SQL Server, Oracle).
NO_SUCH_TABLE = re.compile(
    r"Table/View '[^']*' does not exist|relation \"[^\"]*\" does not exist"
    r"|Table '[^']*' doesn't exist|Invalid object name|ORA-00942",
)


def delete_exported(
    spark: SparkSession, options: dict[str, str], table: str, batches: list[int]
) -> None:
    """Delete the rows of ``batches`` that an earlier attempt exported to the database table:
    a retry after a later step failed, or a reprocess, appends them again, once.

    Through Spark's JDBC source, which any session has (a Spark Connect client too): a read
    whose ``sessionInitStatement`` is the DELETE, run on the connection before its query,
    which selects nothing. Reading the query's schema fails when the table does not exist
    yet, and then nothing was exported before. ``table`` passed the registry's check
    (:data:`JDBC_TABLE`); the ids are integers."""
    if not batches:
        return
    ids = ", ".join(str(int(b)) for b in batches)
    # The column as Spark created it: quoted, in lower case (Derby and Oracle would read an
    # unquoted name in upper case), with the quotes of the database's dialect.
    mysql = options["url"].startswith(("jdbc:mysql:", "jdbc:mariadb:"))
    column = "`batch_id`" if mysql else '"batch_id"'
    reader = (
        spark.read.format("jdbc")
        .options(**{k: v for k, v in options.items() if k != "dbtable"})
        .option("query", f"SELECT 1 AS one FROM {table} WHERE 1 = 0")
        .option("sessionInitStatement", f"DELETE FROM {table} WHERE {column} IN ({ids})")
    )
    try:
        frame = reader.load()
    except Exception as exc:
        if not NO_SUCH_TABLE.search(str(exc)):
            raise  # the database is unreachable, refuses the login...: the step fails
        log.info("export to %s: no table yet, so no rows to replace", table)
        return
    frame.collect()


def lineage(
    source: str, frame: DataFrame, destination: str, *, cast: tuple[str, ...]
) -> StepLineage:
    """Every column of the table, ``batch_id`` too, into the destination's of its name
    (``cast`` names those converted on the way)."""
    origin = table_name(source)
    written = Write(destination, frame.columns)
    for column in frame.columns:
        written.feed(origin, column, column, *(("cast",) if column in cast else ()))
    return StepLineage(f"spark.export: {origin} into {destination}", [written])


def spark_export(context: StepContext) -> Counters:
    from pyspark.sql import functions as F

    from processes.step_kinds.spark_io import input_batches, read_table, start
    from processes.step_kinds.spark_session import get_spark

    props = context.properties("export")
    fmt = props["format"]
    named = destinations({"export": props})
    if not named:
        raise ValueError(
            "export.location is required for csv and parquet, export.jdbc_url and "
            "export.jdbc_table for jdbc"
        )
    destination = named[0]
    spark = get_spark()
    start(context, spark)
    df = read_table(context, spark, props["source_table"], input_batches(context)).cache()
    rows = df.count()
    cast: tuple[str, ...] = ()  # the columns converted on the way
    if fmt in ("csv", "parquet"):
        location = spark_path(destination)
        writer = df.write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
        writer = writer.partitionBy("batch_id")
        if fmt == "csv":
            writer.option("header", "true").csv(location)
        else:
            writer.parquet(location)
        # The batches the frame holds: a dynamic overwrite leaves the folder of a batch
        # with no row as an earlier export left it, which this run did not write.
        exported = [r[0] for r in df.select("batch_id").distinct().collect()]
        context.record_files_written(exported_files(destination, exported, spark))
    else:
        options = {"url": props["jdbc_url"], "dbtable": props["jdbc_table"]}
        if props.get("jdbc_driver"):
            options["driver"] = props["jdbc_driver"]
        mode = props["mode"]
        if mode == "append":
            delete_exported(spark, options, props["jdbc_table"], input_batches(context))
        df.withColumn("batch_id", F.col("batch_id").cast("long")).write.format("jdbc").options(
            **options
        ).mode(mode).save()
        cast = ("batch_id",)
    context.record_lineage(lambda: lineage(props["source_table"], df, destination, cast=cast))
    return {"rows_out": rows, "format": fmt}


def exported_files(
    destination: str, batch_ids: list[int], spark: SparkSession | None = None
) -> list[tuple[str, int]]:
    """The data files now in the batches' folders of the export's ``destination`` (what a
    dynamic overwrite of those partitions left there), with their bytes; through
    ``spark``'s Hadoop FileSystem on a store only Hadoop reaches (none listed from a Spark
    Connect client, which has no JVM: the files are written all the same)."""
    from batches import partitions, stores

    try:
        stores.of(destination, spark)
    except stores.StoreUnreachable:
        return []
    found = []
    for batch_id in sorted(batch_ids):
        folder = f"{destination.rstrip('/')}/batch_id={batch_id}"
        found += [(f"{folder}/{name}", size) for name, size in partitions.data_files(folder, spark)]
    return found


FORMATS = ("csv", "parquet", "jdbc")
# A database table an export writes: a name, or schema.name (catalog.schema.name), unquoted:
# it goes into the statement that replaces an earlier attempt's rows (delete_exported).
JDBC_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}")
MODES = ("append", "overwrite")


def check_export(properties: PropertyGroups) -> None:
    """An export's ``jdbc_driver`` must be one of ``BDRE_JDBC_DRIVERS``: Spark loads the class
    by its name, which runs its static code. Its ``jdbc_table`` is a plain name, and its
    ``mode`` one Spark and BDRE's rerun rule know."""
    export = properties.get("export", {})
    driver = str(export.get("jdbc_driver") or "")
    if driver and driver not in settings.BDRE_JDBC_DRIVERS:
        raise RefusedProperty(
            f"export.jdbc_driver {driver!r} is not one of BDRE_JDBC_DRIVERS: "
            f"{', '.join(settings.BDRE_JDBC_DRIVERS)}"
        )
    table = export.get("jdbc_table")
    if table is not None and not JDBC_TABLE.fullmatch(str(table)):
        raise RefusedProperty(
            f"export.jdbc_table must be a plain table name (name or schema.name: letters, "
            f"digits, _ and $), got {table!r}"
        )
    mode = export.get("mode")
    if mode is not None and str(mode) not in MODES:
        raise RefusedProperty(f"export.mode must be append or overwrite, got {mode!r}")
    fmt = export.get("format")
    if fmt is not None and str(fmt) not in FORMATS:
        raise RefusedProperty(f"export.format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def destinations(properties: PropertyGroups) -> list[str]:
    """Where the export writes, outside the warehouse: its folder (each batch in
    ``batch_id=<id>`` below it), or its database table (``lineage.steps.jdbc_name``, no
    credentials), whose rows of a batch an export replaces. ``properties`` hold the
    defaults; none if they name no destination."""
    export = properties.get("export", {})
    location = str(export.get("location") or "").rstrip("/")
    url, table = str(export.get("jdbc_url") or ""), str(export.get("jdbc_table") or "")
    if export.get("format") == "jdbc":
        return [jdbc_name(url, table)] if url and table else []
    return [location] if location else []


KIND = register(
    StepKind(
        "spark.export",
        spark_export,
        properties={
            "export": {
                "source_table": Prop(help="the table exported (db.table; required)"),
                "format": Prop("parquet", f"one of {', '.join(FORMATS)}"),
                "location": Prop(help="csv, parquet: the folder written (a URI)"),
                "jdbc_url": Prop(help="jdbc: the database, a URL granted to the team"),
                "jdbc_table": Prop(help="jdbc: the table written (name or schema.name)"),
                "jdbc_driver": Prop(help="jdbc: the driver class, one of BDRE_JDBC_DRIVERS"),
                "mode": Prop("append", "jdbc: append (a batch's rows replaced) or overwrite"),
            }
        },
        reads=(Table("export", "source_table"),),
        locations=StepLocations("export", ("location", "jdbc_url")),
        query_kind=QueryKind.SPARK_EXPORT,
        checks=(check_export,),
        spark=True,
        destinations=destinations,
    )
)
