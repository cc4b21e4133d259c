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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from batches.locations import spark_path
from lineage.steps import StepLineage, Write, jdbc_name, table_name
from processes.step_kinds import Counters, StepContext, register
from processes.step_kinds.spark_io import input_batches, read_table, record_lineage, start
from processes.step_kinds.spark_session import get_spark

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
    (``checks.JDBC_TABLE``); the ids are integers."""
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


@register("spark.export")
def spark_export(context: StepContext) -> Counters:
    props = context.properties("export")
    fmt = props.get("format", "parquet")
    spark = get_spark()
    start(context, spark)
    df = read_table(context, spark, props["source_table"], input_batches(context)).cache()
    rows = df.count()
    cast: tuple[str, ...] = ()  # the columns converted on the way
    if fmt in ("csv", "parquet"):
        location = spark_path(props["location"].rstrip("/"))
        writer = df.write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
        writer = writer.partitionBy("batch_id")
        if fmt == "csv":
            writer.option("header", "true").csv(location)
        else:
            writer.parquet(location)
        destination = props["location"].rstrip("/")
    elif fmt == "jdbc":
        options = {"url": props["jdbc_url"], "dbtable": props["jdbc_table"]}
        if props.get("jdbc_driver"):
            options["driver"] = props["jdbc_driver"]
        mode = props.get("mode", "append")
        if mode == "append":
            delete_exported(spark, options, props["jdbc_table"], input_batches(context))
        df.withColumn("batch_id", F.col("batch_id").cast("long")).write.format("jdbc").options(
            **options
        ).mode(mode).save()
        destination, cast = jdbc_name(props["jdbc_url"], props["jdbc_table"]), ("batch_id",)
    else:
        raise ValueError(f"export.format must be csv, parquet or jdbc, got {fmt!r}")
    record_lineage(
        context,
        "spark.export",
        describe=lambda: lineage(props["source_table"], df, destination, cast=cast),
    )
    return {"rows_out": rows, "format": fmt}
