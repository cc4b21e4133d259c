"""``spark.load``: the raw files of the claimed batches into a Parquet table partitioned by
batch id. Properties (group ``load``): ``format`` (csv, tsv, json, parquet, text), ``table``
(``db.table``), ``schema`` (a DDL string such as ``id INT, name STRING``; inferred if
absent), ``header`` (``true`` for csv/tsv). With a schema, csv, tsv and json rows that do not
fit it go to ``<table>_bad`` with the reason and the source file. The column mapping, from
the files' folder to the tables, is recorded as the run's lineage (``lineage.steps``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineage.models import QueryKind
from lineage.steps import StepLineage, Write, table_name
from processes.step_kinds import Counters, Prop, StepContext, StepKind, Table, register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("csv", "tsv", "json", "parquet", "text")
CORRUPT = "_corrupt_record"


def read_raw(
    spark: SparkSession, paths: list[str], fmt: str, *, schema: str = "", header: bool = True
) -> DataFrame:
    """The files as rows, with ``source_file`` and, where rows can fail to parse, the raw
    text of those that did in ``_corrupt_record``."""
    from pyspark.sql import functions as F

    if fmt not in FORMATS:
        raise ValueError(f"load.format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    reader = spark.read
    if fmt in ("csv", "tsv", "json") and schema:
        reader = reader.schema(f"{schema}, {CORRUPT} STRING").option("mode", "PERMISSIVE")
        reader = reader.option("columnNameOfCorruptRecord", CORRUPT)
    elif schema and fmt != "text":
        reader = reader.schema(schema)
    if fmt in ("csv", "tsv"):
        reader = reader.option("header", str(header).lower()).option(
            "sep", "\t" if fmt == "tsv" else ","
        )
        df = reader.csv(paths)
    else:
        df = getattr(reader, fmt)(paths)
    return df.withColumn("source_file", F.input_file_name())


def split_corrupt(df: DataFrame, fmt: str) -> tuple[DataFrame, DataFrame]:
    """Rows that parsed, and the others with the reason."""
    from pyspark.sql import functions as F

    if CORRUPT not in df.columns:
        return df, df.sparkSession.createDataFrame(
            [], "line string, source_file string, reason string"
        )
    # Spark will not filter a cached-less scan on the corrupt column alone; cache first.
    df = df.cache()
    good = df.filter(F.col(CORRUPT).isNull()).drop(CORRUPT)
    bad = df.filter(F.col(CORRUPT).isNotNull()).select(
        F.col(CORRUPT).alias("line"),
        "source_file",
        F.lit(f"does not fit the declared schema as {fmt}").alias("reason"),
    )
    return good, bad


def lineage(
    folders: list[str],
    raw: DataFrame,
    fmt: str,
    table: str,
    good: DataFrame,
    bad: DataFrame | None,
    *,
    declared: bool,
) -> StepLineage:
    """The files' columns into the table's (cast from text to a declared type), their raw
    line into the bad rows' ``line``; ``source_file`` is the file's name, from no column."""
    types = {f.name: f.dataType.simpleString() for f in raw.schema.fields}
    columns = [c for c in types if c not in (CORRUPT, "source_file")]
    parsed = declared and fmt in ("csv", "tsv", "json")
    loaded = Write(table_name(table), good.columns)
    writes = [loaded]
    for folder in folders:
        for column in columns:
            cast = ("cast",) if parsed and types[column] != "string" else ()
            loaded.feed(folder, column, column, *cast)
    if bad is not None:
        rejected = Write(table_name(f"{table}_bad"), bad.columns)
        for folder in folders:
            for column in columns:
                rejected.feed(folder, column, "line", "unparsed")
        writes.append(rejected)
    targets = ", ".join(w.target for w in writes)
    return StepLineage(f"spark.load: {fmt} files of {', '.join(folders)} into {targets}", writes)


def spark_load(context: StepContext) -> Counters:
    from processes.step_kinds.spark_io import (
        input_folders,
        readable_files,
        start,
        write_batch,
    )
    from processes.step_kinds.spark_session import get_spark

    props = context.properties("load")
    fmt, table = props["format"], props["table"]
    database, _, name = table.rpartition(".")
    if not context.files:
        return {"files": 0, "rows_in": 0, "rows_out": 0, "bad_rows": 0}
    spark = get_spark()
    start(context, spark)
    schema = props["schema"]
    raw = read_raw(
        spark,
        readable_files(context),  # checked as they are now, right before Spark reads them
        fmt,
        schema=schema,
        header=props["header"].lower() == "true",
    )
    good, bad = split_corrupt(raw, fmt)
    good = good.cache()
    rows_out, bad_rows = good.count(), bad.count()
    write_batch(good, context, database or "default", name)
    if bad_rows:
        write_batch(
            bad, context, database or "default", f"{name}_bad", comments="rows that failed to load"
        )
    folders = input_folders(context)
    context.record_lineage(
        lambda: lineage(
            folders, raw, fmt, table, good, bad if bad_rows else None, declared=bool(schema)
        ),
    )
    return {
        "files": len(context.files),
        "rows_in": rows_out + bad_rows,
        "rows_out": rows_out,
        "bad_rows": bad_rows,
    }


KIND = register(
    StepKind(
        "spark.load",
        spark_load,
        properties={
            "load": {
                "format": Prop("csv", f"the files' format: {', '.join(FORMATS)}"),
                "table": Prop("default.{step}", "the table written (db.table)"),
                "schema": Prop("", "a DDL string (id INT, name STRING); inferred if empty"),
                "header": Prop("true", "csv and tsv files start with a header line"),
            }
        },
        writes=(Table("load", "table"),),
        query_kind=QueryKind.SPARK_LOAD,
        spark=True,
        accounts=True,
    )
)
