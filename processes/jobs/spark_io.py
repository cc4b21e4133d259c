"""The thin runner side of the Spark kinds: session bookkeeping, reading claimed files,
writing per-batch partitions and registering tables. Transforms live beside each kind."""

from __future__ import annotations

from django.conf import settings
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from batches.models import HiveTable
from processes.jobs import JobContext
from processes.models import InstanceExec

BATCH_COLUMN = "batch_id"


def spark_path(uri: str) -> str:
    """A registered file's URI as Spark reads it (``s3://`` through the s3a connector)."""
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def start(context: JobContext, spark: SparkSession) -> None:
    """Record the Spark application id on the step's run."""
    InstanceExec.objects.filter(pk=context.step_run_id).update(
        spark_application_id=spark.sparkContext.applicationId
    )


def table_location(database: str, table: str) -> str:
    return str(settings.BDRE_WAREHOUSE / database / table)


class PartitionWrittenTwice(RuntimeError):
    pass


def write_batch(
    df: DataFrame, context: JobContext, database: str, table: str, *, comments: str = ""
) -> HiveTable:
    """Write ``df`` as the target batch's partition of a Parquet table and register it: the
    partition's folder is overwritten, so a re-run replaces its own partition and leaves
    the others.

    A step writes a table's partition once: a second write would replace the first (two
    versions of one schema once lost their first version's rows that way), so it fails.
    The partition is written as a folder of its own rather than by a partitioned write
    with dynamic overwrite: a frame without rows then still leaves a Parquet file with the
    schema, so that the table is readable (Spark cannot infer the schema of a folder with
    no file), and a re-run that finds nothing replaces an earlier attempt's rows (a dynamic
    overwrite with no rows touches no partition and left them)."""
    written = f"{database}.{table}"
    if written in context.outputs:
        raise PartitionWrittenTwice(
            f"{context.step.name} wrote batch {context.target_batch_id} of {written} twice; "
            "the second write would replace the first"
        )
    location = table_location(database, table)
    partition = f"{location}/{BATCH_COLUMN}={context.target_batch_id}"
    df = df.drop(BATCH_COLUMN)
    df.write.mode("overwrite").parquet(partition)
    # Kept on the run as soon as written: a failed step still says what it touched.
    context.outputs.append(written)
    InstanceExec.objects.filter(pk=context.step_run_id).update(outputs=context.outputs)
    registered, _ = HiveTable.objects.update_or_create(
        dbname=database,
        table_name=table,
        defaults={
            "location": location,
            "location_type": HiveTable.LocationType.EXTERNAL,
            "batch_id_partition_col": BATCH_COLUMN,
            "bus_domain_id": context.step.bus_domain_id,
            "ddl": df.schema.simpleString(),
            "comments": comments or f"written by {context.step.name}",
        },
    )
    return registered


class TableNotRegistered(LookupError):
    pass


def registered(name: str) -> HiveTable:
    """A registered table by ``db.table`` (or ``table`` in ``default``)."""
    database, _, table = name.rpartition(".")
    found = HiveTable.objects.filter(dbname=database or "default", table_name=table).first()
    if found is None:
        raise TableNotRegistered(f"table {name} is not registered")
    return found


def input_batches(context: JobContext) -> list[int]:
    """The partitions a step reads from a table: the batches it claimed (the upstream runs'
    target batches) and its own run's target batch (written by an earlier step of the job)."""
    return sorted({b for b in context.batch_ids if b} | {context.target_batch_id})


def read_table(spark: SparkSession, name: str, batch_ids: list[int] | None = None) -> DataFrame:
    table = registered(name)
    df = spark.read.parquet(table.location)
    if batch_ids is not None and table.batch_id_partition_col:
        df = df.filter(F.col(table.batch_id_partition_col).isin(batch_ids))
    return df
