"""``spark.sql``: a semantic step. A Spark SQL statement over registered tables, its result
written as the target batch's partition of an output table. Properties (group ``sql``):
``query`` and ``output_table`` (``db.table``). Every registered table of the application is
readable by its ``db.table`` name; ``{batch_ids}`` in the query stands for the batches the
step claimed (and its own run's batch), ``{target_batch_id}`` for the run's batch::

    SELECT to_date(collector_tstamp) AS day, count(*) AS views
    FROM lake.atomic_events WHERE batch_id IN ({batch_ids}) GROUP BY 1

The statement is kept as a ``LineageQuery`` of the run and its column lineage extracted
against the schemas of the tables it can read (``lineage.extract``); a statement the lineage
parser cannot read keeps the reason, and the step runs all the same.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from batches.models import HiveTable
from lineage.extract import record_query
from lineage.models import LineageQuery, QueryKind
from processes.jobs import Counters, JobContext, register
from processes.jobs.spark_io import input_batches, start, write_batch
from processes.jobs.spark_session import get_spark


def register_tables(spark: SparkSession, bus_domain_id: int) -> list[str]:
    """Make the application's registered tables readable by name in this session."""
    names = []
    for table in HiveTable.objects.filter(bus_domain_id=bus_domain_id).order_by("id"):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{table.dbname}`")
        spark.sql(f"DROP TABLE IF EXISTS `{table.dbname}`.`{table.table_name}`")
        spark.catalog.createTable(
            f"{table.dbname}.{table.table_name}", path=table.location, source="parquet"
        )
        if table.batch_id_partition_col:
            spark.sql(f"ALTER TABLE `{table.dbname}`.`{table.table_name}` RECOVER PARTITIONS")
        names.append(f"{table.dbname}.{table.table_name}")
    return names


def table_schemas(spark: SparkSession, names: list[str]) -> dict[str, dict[str, dict]]:
    """``{db: {table: {column: type}}}`` of registered tables, as Spark reads them."""
    schema: dict[str, dict[str, dict]] = {}
    for name in names:
        database, _, table = name.partition(".")
        columns = {f.name: f.dataType.simpleString() for f in spark.table(name).schema.fields}
        schema.setdefault(database, {})[table] = columns
    return schema


def trace_lineage(spark: SparkSession, query: LineageQuery, tables: list[str], output: str) -> None:
    # Lineage is a record of the step, never a reason for it to fail: any error is kept on
    # the query instead.
    try:
        record_query(query, schema=table_schemas(spark, tables), target=output)
    except Exception as exc:
        query.parse_error = f"lineage failed: {exc}"[:2000]
        query.save(update_fields=["parse_error"])


def render(query: str, batch_ids: list[int], target_batch_id: int) -> str:
    return query.replace("{batch_ids}", ", ".join(str(b) for b in batch_ids)).replace(
        "{target_batch_id}", str(target_batch_id)
    )


@register("spark.sql")
def spark_sql(context: JobContext) -> Counters:
    props = context.properties("sql")
    if not props.get("query"):
        raise ValueError(f"{context.step.name}: property sql.query is required")
    output = props.get("output_table", f"default.{context.step.name}")
    database, _, table = output.rpartition(".")
    statement = render(props["query"], input_batches(context), context.target_batch_id)
    query = LineageQuery.objects.create(
        query_string=statement,
        query_type_id=QueryKind.SPARK_SQL,
        process=context.step,
        instance_exec_id=context.step_run_id,
    )
    spark = get_spark()
    start(context, spark)
    tables = register_tables(spark, context.step.bus_domain_id)
    trace_lineage(spark, query, tables, f"{database or 'default'}.{table}")
    result = spark.sql(statement).cache()
    write_batch(result, context, database or "default", table, comments=statement)
    return {"rows_out": result.count(), "tables_read": len(spark.catalog.listTables())}
