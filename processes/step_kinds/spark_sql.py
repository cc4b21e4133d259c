"""``spark.sql``: a semantic step. A Spark SQL statement over registered tables, its result
written as the target batch's partition of an output table. Properties (group ``sql``):
``query`` and ``output_table`` (``db.table``). The tables the step's team may read (its own
and those shared with it, ``batches.tables``) are readable by their ``db.table`` names, and
only those; ``{batch_ids}`` in the query stands for the batches the step claimed (and its own
run's batch), ``{target_batch_id}`` for the run's batch::

    SELECT to_date(collector_tstamp) AS day, count(*) AS views
    FROM lake.atomic_events WHERE batch_id IN ({batch_ids}) GROUP BY 1

The statement is kept as a ``LineageQuery`` of the run and its column lineage extracted
against the schemas of the tables it can read (``lineage.extract``); a statement the lineage
parser cannot read keeps the reason, and the step runs all the same.

Only one query runs (``processes.step_kinds.sql_guard``, docs/security.md): the rendered
statement is checked before anything else, and a refused one fails the run with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batches import partitions, tables
from batches.catalog import metastore
from batches.locations import spark_path
from bdre.sql_parse import StatementTooDeep
from lineage.extract import record_query
from lineage.models import LineageQuery, QueryKind
from processes.step_kinds import (
    Counters,
    Prop,
    StepContext,
    StepKind,
    Table,
    check_value,
    register,
)
from processes.step_kinds.sql_guard import (
    RefusedStatement,
    check_query,
    check_statement,
    render,
)

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession


def register_tables(
    spark: SparkSession,
    team_id: int,
    *,
    own_batch: int | None = None,
    own_run: int | None = None,
) -> list[str]:
    """Make the tables the team may read (``batches.tables.readable_tables``: its own and
    those shared with it) readable by name in this session, and only those.

    The worker's session outlives the step: the tables an earlier step of another team
    registered are still in its catalog, so every table the team may not read is dropped
    first (the catalog is in memory: dropping a table never touches its files). A worker
    runs one Spark step at a time (the ``spark`` queue's concurrency is 1).

    A table's partitions are those the step sees (``batches.partitions.visible``: the
    published ones, and what the step's job wrote for ``own_batch`` before publishing it),
    each at its own location: never the unpublished attempts beside them in the folder."""
    readable = tables.readable_tables(team_id)
    wanted = {(t.dbname.lower(), t.table_name.lower()) for t in readable}
    for database in spark.catalog.listDatabases():
        quoted = metastore.quote(database.name)
        kept = False
        for found in _tables_in(spark, database.name):
            if found.isTemporary or (database.name.lower(), found.tableName.lower()) in wanted:
                kept = True
                continue
            spark.sql(f"DROP TABLE IF EXISTS {quoted}.{metastore.quote(found.tableName)}")
        if database.name != "default" and not kept:
            spark.sql(f"DROP DATABASE IF EXISTS {quoted}")
    names = []
    for table in readable:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{table.dbname}`")
        name = f"{table.dbname}.{table.table_name}"
        spark.sql(f"DROP TABLE IF EXISTS {metastore.qualified(name)}")
        if table.batch_id_partition_col and partitions.tracked(table):
            _register_partitions(spark, name, table, own_batch, own_run)
        else:
            spark.catalog.createTable(name, path=table.location, source="parquet")
            if table.batch_id_partition_col:
                spark.sql(f"ALTER TABLE {metastore.qualified(name)} RECOVER PARTITIONS")
        names.append(name)
    return names


def _register_partitions(
    spark: SparkSession,
    name: str,
    table: tables.HiveTable,
    own_batch: int | None,
    own_run: int | None,
) -> None:
    from pyspark.sql.types import IntegerType, StructField, StructType

    seen = partitions.visible(table, own_batch=own_batch, own_run=own_run)
    column = table.batch_id_partition_col
    if seen:
        schema = partitions.read(spark, table.location, [p.location for p in seen]).schema
    else:
        # Nothing published yet: the table's columns, as its last write recorded them.
        schema = spark.createDataFrame([], table.ddl).schema
        schema = StructType([*schema.fields, StructField(column, IntegerType())])
    metastore.create_partitioned(
        spark, name, schema, column=column, location=spark_path(table.location)
    )
    metastore.put_partitions(
        spark, name, column, {p.batch_id: spark_path(p.location) for p in seen}
    )


def not_readable(exc: Exception, team_id: int) -> tables.TableNotReadable | None:
    """Spark's "table not found" as the error a step gets for a table its team may not read
    (the name, and what it may read); None for any other error."""
    from pyspark.errors import PySparkException

    if not isinstance(exc, PySparkException) or exc.getCondition() != "TABLE_OR_VIEW_NOT_FOUND":
        return None
    relation = (exc.getMessageParameters() or {}).get("relationName", "")
    name = relation.replace("`", "")
    # A path read as a table (text.`/etc/passwd`) is the sandbox's business: Spark's words.
    if not all(tables.NAME.fullmatch(part) for part in tables.split_name(name)):
        return None
    try:
        tables.readable_table(team_id, name)
    except tables.TableNotReadable as refused:
        return refused
    return None


def table_schemas(spark: SparkSession, names: list[str]) -> dict[str, dict[str, dict[str, str]]]:
    """``{db: {table: {column: type}}}`` of registered tables, as Spark reads them."""
    schema: dict[str, dict[str, dict[str, str]]] = {}
    for name in names:
        database, _, table = name.partition(".")
        columns = {f.name: f.dataType.simpleString() for f in spark.table(name).schema.fields}
        schema.setdefault(database, {})[table] = columns
    return schema


def trace_lineage(
    spark: SparkSession, query: LineageQuery, tables: list[str], output: str
) -> list[str]:
    """The query's column lineage, kept; the tables it reads (none when it cannot be read)."""
    # Lineage is a record of the step, never a reason for it to fail: any error is kept on
    # the query instead.
    try:
        extracted = record_query(query, schema=table_schemas(spark, tables), target=output)
    except Exception as exc:
        query.parse_error = f"lineage failed: {exc}"[:2000]
        query.save(update_fields=["parse_error"])
        return []
    return extracted.sources if extracted is not None else []


def check_with_spark(spark: SparkSession, statement: str) -> None:
    """Spark's own grammar must read ``statement`` as a query: a second parser, so that a
    statement sqlglot reads as a SELECT and Spark as a command never runs.

    The statement is parsed as the body of a common table expression, which Spark's grammar
    takes only as a query (``FROM (...)`` would also take a relation, and so a command word
    read as a table's name: ``RESET``, ``USE x``), under EXPLAIN: nothing runs, and a table
    the query names that is not registered yet (they are registered after this check) is
    only a line of the plan's text. Through the SQL API, which any session has (a Spark
    Connect client has no parser of its own)."""
    body = statement.strip().rstrip(";")  # which Spark takes after a statement, not in a CTE
    try:
        spark.sql(
            f"EXPLAIN WITH bdre_checked_query AS (\n{body}\n) SELECT * FROM bdre_checked_query"
        ).collect()
    except Exception as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        reason = lines[0].strip() if lines else type(exc).__name__
        raise RefusedStatement(
            f"Spark does not read the statement as one query ({reason})"
        ) from exc


def spark_sql(context: StepContext) -> Counters:
    from processes.step_kinds.spark_io import input_batches, start, team_of, write_batch
    from processes.step_kinds.spark_session import get_spark

    props = context.properties("sql")
    if not props.get("query"):
        raise ValueError(f"{context.step.name}: property sql.query is required")
    output = props["output_table"]
    database, _, table = output.rpartition(".")
    statement = render(props["query"], input_batches(context), context.target_batch_id)
    spark = get_spark()
    try:
        check_statement(statement)
        check_with_spark(spark, statement)
    except (RefusedStatement, StatementTooDeep) as exc:
        context.log("sql.refused", str(exc), category="error")
        raise
    query = LineageQuery.objects.create(
        query_string=statement,
        query_type_id=QueryKind.SPARK_SQL,
        process=context.step,
        instance_exec_id=context.step_run_id,
    )
    start(context, spark)
    team_id = team_of(context)
    # Before the query runs: a name shared read-only, or another team's folder, is refused.
    tables.writable_table(team_id, database or "default", table)
    readable = register_tables(
        spark, team_id, own_batch=context.target_batch_id, own_run=context.job_run_id
    )
    context.record_input(*trace_lineage(spark, query, readable, f"{database or 'default'}.{table}"))
    try:
        result = spark.sql(statement).cache()
    except Exception as exc:
        refused = not_readable(exc, team_id)
        if refused is None:
            raise
        context.log("table.refused", str(refused), category="error")
        raise refused from None
    write_batch(result, context, database or "default", table, comments=statement)
    return {"rows_out": result.count(), "tables_read": len(_tables_in(spark))}


def _tables_in(spark: SparkSession, database: str = "") -> list[Row]:
    """The tables and temporary views of ``database`` (the current one if empty), as rows of
    ``SHOW TABLES`` (``tableName``, ``isTemporary``). Not ``spark.catalog.listTables``: Spark
    builds its ``Table`` objects only through generated code, and fails to with interpreted
    expressions (``spark.sql.codegen.factoryMode=NO_CODEGEN``, which the test sessions run:
    docs/testing.md, "Side by side")."""
    where = f" IN {metastore.quote(database)}" if database else ""
    return spark.sql(f"SHOW TABLES{where}").collect()


KIND = register(
    StepKind(
        "spark.sql",
        spark_sql,
        properties={
            "sql": {
                "query": Prop(
                    help="one SELECT over the team's tables; {batch_ids} and "
                    "{target_batch_id} stand for the batches (required)"
                ),
                "output_table": Prop("default.{step}", "the table written (db.table)"),
            }
        },
        writes=(Table("sql", "output_table"),),
        statement=Table("sql", "query"),
        query_kind=QueryKind.SPARK_SQL,
        checks=(check_value("sql", "query", check_query),),
        spark=True,
    )
)
