"""``spark.export``: a registered table's partitions of this run to files or a database.
Properties (group ``export``): ``source_table`` (``db.table``), ``format`` (csv, parquet or
jdbc); for files ``location`` (a folder URI; each batch goes to ``batch_id=<id>`` below it,
replaced on a re-run); for jdbc ``jdbc_url``, ``jdbc_table``, ``jdbc_driver`` and the mode
(``append`` by default)."""

from __future__ import annotations

from pyspark.sql import functions as F

from batches.locations import spark_path
from processes.jobs import Counters, JobContext, register
from processes.jobs.spark_io import input_batches, read_table, start
from processes.jobs.spark_session import get_spark


@register("spark.export")
def spark_export(context: JobContext) -> Counters:
    props = context.properties("export")
    fmt = props.get("format", "parquet")
    spark = get_spark()
    start(context, spark)
    df = read_table(context, spark, props["source_table"], input_batches(context)).cache()
    rows = df.count()
    if fmt in ("csv", "parquet"):
        location = spark_path(props["location"].rstrip("/"))
        writer = df.write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
        writer = writer.partitionBy("batch_id")
        if fmt == "csv":
            writer.option("header", "true").csv(location)
        else:
            writer.parquet(location)
    elif fmt == "jdbc":
        options = {"url": props["jdbc_url"], "dbtable": props["jdbc_table"]}
        if props.get("jdbc_driver"):
            options["driver"] = props["jdbc_driver"]
        df.withColumn("batch_id", F.col("batch_id").cast("long")).write.format("jdbc").options(
            **options
        ).mode(props.get("mode", "append")).save()
    else:
        raise ValueError(f"export.format must be csv, parquet or jdbc, got {fmt!r}")
    return {"rows_out": rows, "format": fmt}
