"""``spark.export``: a registered table's partitions of this run to files or a database.
Properties (group ``export``): ``source_table`` (``db.table``), ``format`` (csv, parquet or
jdbc); for files ``location`` (a folder URI; each batch goes to ``batch_id=<id>`` below it,
replaced on a re-run); for jdbc ``jdbc_url``, ``jdbc_table``, ``jdbc_driver`` and the mode
(``append`` by default). The column mapping, table to folder or database table, is recorded
as the run's lineage (``lineage.steps``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from batches.locations import spark_path
from lineage.steps import StepLineage, Write, jdbc_name, table_name
from processes.jobs import Counters, JobContext, register
from processes.jobs.spark_io import input_batches, read_table, record_lineage, start
from processes.jobs.spark_session import get_spark


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
def spark_export(context: JobContext) -> Counters:
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
        df.withColumn("batch_id", F.col("batch_id").cast("long")).write.format("jdbc").options(
            **options
        ).mode(props.get("mode", "append")).save()
        destination, cast = jdbc_name(props["jdbc_url"], props["jdbc_table"]), ("batch_id",)
    else:
        raise ValueError(f"export.format must be csv, parquet or jdbc, got {fmt!r}")
    record_lineage(
        context,
        "spark.export",
        describe=lambda: lineage(props["source_table"], df, destination, cast=cast),
    )
    return {"rows_out": rows, "format": fmt}
