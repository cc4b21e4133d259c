"""The thin runner side of the Spark kinds: session bookkeeping, reading claimed files,
writing per-batch partitions and registering tables. Transforms live beside each kind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from batches import partitions, stores, tables
from batches.locations import LocationRefused, TeamStorage, spark_path
from batches.models import HiveTable
from lineage.steps import folder_of, table_name
from processes.models import ExecState, InstanceExec
from processes.step_kinds import StepContext, expectations
from processes.step_kinds.spark_conf import STEP_GROUP
from processes.step_kinds.spark_session import (
    application_id,
    effective_conf,
    get_spark,
    is_stopped,
    step_conf,
    ui_url,
)

BATCH_COLUMN = "batch_id"


def start(context: StepContext, spark: SparkSession) -> None:
    """Record the Spark application id on the step's run (with a Connect session's id: a
    Connect server runs every client's jobs in its one application)."""
    InstanceExec.objects.filter(pk=context.step_run_id).update(
        spark_application_id=application_id(spark)
    )


@contextmanager
def step_session(context: StepContext) -> Iterator[SparkSession]:
    """The worker's session with the step's own Spark options (its ``spark`` properties,
    which checks.check_step_run has just checked as they are now) while the step runs, put
    back after it; the options in effect and the Spark UI are recorded on the step's run."""
    spark = get_spark()
    try:
        with step_conf(spark, context.properties(STEP_GROUP)):
            InstanceExec.objects.filter(pk=context.step_run_id).update(
                spark_conf=effective_conf(spark), spark_ui_url=ui_url(spark)
            )
            yield spark
    finally:
        # What a step cached is its own. Left in the worker's session, a later read of the
        # same files (a batch rebuilt after its file was fixed) would be answered from the
        # cache with the old rows, and the session would grow with every step.
        if not is_stopped(spark):
            spark.catalog.clearCache()


def readable_files(context: StepContext) -> list[str]:
    """The claimed files as Spark reads them, each checked just before Spark is given its
    path (``TeamStorage.check_file``): inside the team's roots as it resolves now, and on a
    local filesystem still a file of the folder's own, not replaced since its scan by a hard
    link to another team's file, a symbolic link or a FIFO. A refusal fails the step, said in
    its log (``location.refused``) and its error.

    What remains: Spark opens the paths itself, later, so a name can still be swapped between
    this check and Spark's open (the race-free open-then-``fstat`` of the scan's hash is not
    possible here). Only a writer of the team's own folder can swap it there, during the
    step's start-up; another team cannot write in that folder."""
    storage = TeamStorage(team_of(context))
    paths = []
    try:
        for file in context.files:
            server = storage.server_of_file(file.path, file.server_id)
            storage.check_file(file.path, server=server)
            paths.append(spark_path(file.path))
    except LocationRefused as exc:
        context.log("location.refused", str(exc), "security")
        raise
    context.record_input(*input_folders(context))
    return paths


def input_folders(context: StepContext) -> list[str]:
    """The folders of the files the step claimed: what its lineage names as its input."""
    return sorted({folder_of(f.path) for f in context.files})


class PartitionWrittenTwice(RuntimeError):
    pass


def write_batch(
    df: DataFrame,
    context: StepContext,
    database: str,
    table: str,
    *,
    comments: str = "",
    checked: bool = True,
) -> HiveTable:
    """Write ``df`` as the target batch's partition of a Parquet table and register it.
    The partition is written to the attempt's own folder (``batch_id=<batch>/run-<step
    run>``, batches.partitions): what readers see is never written over; the job's end
    publishes it in place of the batch's last one, and leaves the other batches.

    A step writes a table's partition once: a second write would replace the first (two
    versions of one schema once lost their first version's rows that way), so it fails.
    The partition is written as a folder of its own rather than by a partitioned write
    with dynamic overwrite: a frame without rows then still leaves a Parquet file with the
    schema, so that the table is readable (Spark cannot infer the schema of a folder with
    no file), and a re-run that finds nothing replaces an earlier attempt's rows (a dynamic
    overwrite with no rows touches no partition and left them).

    Unless ``checked`` is False (the quarantine's own write), the step's expectations on
    ``table`` are counted as the partition is written, the write being the one pass over
    the batch (:func:`_planned`, :func:`_audited`): a failed ``fail`` rule fails the step,
    so that its attempt is never published (the reaper removes it)."""
    written = f"{database}.{table}"
    if written in context.outputs:
        raise PartitionWrittenTwice(
            f"{context.step.name} wrote batch {context.target_batch_id} of {written} twice; "
            "the second write would replace the first"
        )
    # Decided before a byte is written: a step never writes another team's table or folder.
    destination = tables.writable_table(team_of(context), database, table)
    spark = df.sparkSession
    # A store only Hadoop reaches is listed and cleaned through this session's JVM: refused
    # before a byte is written when it has none (a Connect client), or its attempts could
    # never be removed.
    stores.of(destination.location, spark)
    df = df.drop(BATCH_COLUMN)
    planned, held = _planned(df, context, database, table) if checked else (None, False)
    if planned is not None:
        df = planned.kept
    # The attempt's own folder (its step run's): what readers see now is not touched until
    # the job publishes this one in its place (batches.partitions).
    registered_table = tables.register_written(
        destination,
        bus_domain_id=context.step.bus_domain_id,
        defaults={
            "location_type": HiveTable.LocationType.EXTERNAL,
            "batch_id_partition_col": BATCH_COLUMN,
            "ddl": df.schema.simpleString(),
            "comments": comments or f"written by {context.step.name}",
        },
    )
    attempt = partitions.attempt_location(
        registered_table, context.target_batch_id, context.step_run_id
    )
    record = partial(
        partitions.record_written,
        registered_table,
        batch_id=context.target_batch_id,
        step_run_id=context.step_run_id,
        location=attempt,
        spark=spark,
    )
    # Recorded before a byte is written: an attempt that dies in the middle of its write
    # leaves a record by which the reaper finds its files.
    record(rows=None, size=None)
    df.write.mode("overwrite").parquet(spark_path(attempt))
    context.record_output(written)
    rows = spark.read.parquet(spark_path(attempt))
    failed = ""
    if planned is not None:
        failed = _audited(planned, held, rows, context, database, table, destination)
    record(
        rows=rows.count(),
        size=partitions.size_of(attempt, spark),
        checks=[
            c for c in context.checks if (c.get("database"), c.get("table")) == (database, table)
        ],
    )
    if failed:
        raise expectations.ExpectationFailed(
            f"batch {context.target_batch_id} of {written} is not published: {failed}"
        )
    return registered_table


def _planned(
    df: DataFrame, context: StepContext, database: str, table: str
) -> tuple[expectations.Planned | None, bool]:
    """The step's expectations on ``table`` planned on the batch ``df`` (None: it declares
    none), and whether the table has a quarantine already: written once a rule has dropped a
    row of the table, from then on with every batch (empty when nothing is dropped, or no
    rule drops any more), so that a rebuilt batch (a fixed rule or input, replayed) replaces
    its quarantined rows."""
    declared = expectations.rules_of(context.properties(expectations.GROUP))
    rules = [r for r in expectations.in_spark(declared) if r.table.lower() == table.lower()]
    held = (
        tables.own_tables(team_of(context))
        .filter(
            dbname__iexact=database,
            table_name__iexact=table + expectations.QUARANTINE_SUFFIX,
        )
        .exists()
    )
    planned = expectations.plan(df, rules) if rules or held else None
    return planned, held


def _audited(
    planned: expectations.Planned,
    held: bool,
    rows: DataFrame,
    context: StepContext,
    database: str,
    table: str,
    destination: tables.Destination,
) -> str:
    """The rules' results once the partition is written (``rows``: as written), kept on the
    run with a few failing rows each, and the rows a drop rule took out written to
    ``<table>_quarantine``; the failed ``fail`` rules as the step's error says them (then
    nothing more is written: the batch is not published)."""
    checked = expectations.measure(
        planned,
        rows,
        others=_other_batches(rows, context, destination),
        history=partial(_rows_before, context, database),
    )
    checked.results[:] = [{"database": database, **result} for result in checked.results]
    # Kept on the run at once: a step that fails later still shows them all.
    context.record_checks(checked.results)
    for result in checked.results:
        if expectations.is_failure(result):
            context.log("expect.failed", expectations.described(result), "quality")
    failed = list(checked.failed)
    held_rows = None
    if not failed and (checked.dropped or held):
        quarantine = table + expectations.QUARANTINE_SUFFIX
        held_table = write_batch(
            expectations.quarantine(planned, checked, context.step_run_id),
            context,
            database,
            quarantine,
            comments=f"rows of {database}.{table} that a drop expectation took out",
            checked=False,
        )
        context.quarantined.append((f"{database}.{table}", f"{database}.{quarantine}"))
        written = partitions.written_by(held_table, context.target_batch_id, context.step_run_id)
        assert written is not None  # write_batch recorded it
        if checked.dropped:
            held_rows = rows.sparkSession.read.parquet(spark_path(written.location))
        if written.rows != checked.dropped:
            # The quarantine is a second pass over the step's rows: they changed between the
            # two (an input rewritten meanwhile). Published, a row would be lost or doubled.
            failed.append(
                f"{database}.{quarantine} holds {written.rows} rows where the drop rules took "
                f"{checked.dropped} out of the table: the step's input changed while it ran"
            )
    expectations.sample(checked, planned.rules, rows, held_rows)
    context.record_checks([])  # again, with the failing rows found
    return "; ".join(failed)


def _rows_before(context: StepContext, database: str, rule: expectations.Rule) -> list[int]:
    """The rows of the batches the step checked ``rule`` on before, in its runs that
    succeeded, latest first: what a volume rule compares with (the rule takes its last N)."""
    earlier = (
        InstanceExec.objects.filter(process=context.step, exec_state_id=ExecState.SUCCESS)
        .exclude(checks=[])
        .order_by("-id")
        .values_list("checks", flat=True)[: expectations.MAX_HISTORY]
    )
    return [
        int(check["checked"])
        for checks in earlier
        for check in checks
        if (check.get("database"), check["table"], check["rule"])
        == (database, rule.table, rule.name)
    ]


def _other_batches(
    df: DataFrame, context: StepContext, destination: tables.Destination
) -> DataFrame | None:
    """The table's published batches but the one being written (for a key unique across
    them), or None when it has none yet. Asked once the attempt is recorded, when the table
    is tracked: its first attempt adopted what was written in place before."""
    from pyspark.errors import AnalysisException

    table, location = destination.existing, destination.location
    if table is None:
        return None
    others = [
        p.location for p in partitions.published(table) if p.batch_id != context.target_batch_id
    ]
    if not others:
        return None
    try:
        return read_partitions(df.sparkSession, location, others)
    except AnalysisException:
        return None


def days_written(
    context: StepContext, spark: SparkSession, table: HiveTable, column: str
) -> list[str]:
    """The days (``YYYY-MM-DD``, Spark's session time zone, as a query's ``to_date`` sees
    them) of ``column`` in the partition the step just wrote to ``table``: one column read."""
    written = partitions.written_by(table, context.target_batch_id, context.step_run_id)
    if written is None:
        return []
    day = F.to_date(F.col(column))
    rows = (
        read_partitions(spark, table.location, [written.location])
        .select(day.alias("day"))
        .distinct()
        .collect()
    )
    return sorted(row.day.isoformat() for row in rows if row.day is not None)


def team_of(context: StepContext) -> int:
    """The team whose tables a step reads and writes: its application's."""
    return context.step.bus_domain.team_id


# A name the step's team may not read: the step fails with what it may read.
TableNotRegistered = tables.TableNotReadable


def registered(context: StepContext, name: str) -> HiveTable:
    """The table ``db.table`` (or ``table`` in ``default``) means to the step's team."""
    return tables.readable_table(team_of(context), name)


def input_batches(context: StepContext) -> list[int]:
    """The partitions a step reads from a table: the batches it claimed (the upstream runs'
    target batches) and its own run's target batch (written by an earlier step of the job)."""
    return sorted({b for b in context.batch_ids if b} | {context.target_batch_id})


def read_table(
    context: StepContext, spark: SparkSession, name: str, batch_ids: list[int] | None = None
) -> DataFrame:
    """The partitions of the table ``name`` the step sees (``batches.partitions.visible``:
    published ones, and what its job's earlier steps wrote for its target batch), of
    ``batch_ids`` or all."""
    table = registered(context, name)
    context.record_input(table_name(name))
    if not table.batch_id_partition_col or not partitions.tracked(table):
        context.record_rows_read(name, [None])  # folders BDRE did not count
        df = spark.read.parquet(spark_path(table.location))
        if batch_ids is not None and table.batch_id_partition_col:
            df = df.filter(F.col(table.batch_id_partition_col).isin(batch_ids))
        return df
    seen = partitions.visible(
        table, batch_ids, own_batch=context.target_batch_id, own_run=context.job_run_id
    )
    context.record_rows_read(name, [p.rows for p in seen])
    return read_partitions(
        spark, table.location, [p.location for p in seen], schema_of=table.ddl or None
    )


def read_partitions(
    spark: SparkSession, location: str, paths: list[str], *, schema_of: str | None = None
) -> DataFrame:
    """The partitions at ``paths`` of the table at ``location``, with its ``batch_id``
    column (read from their folders' names, the table's folder as the base). No partition:
    no rows, with the table's columns when ``schema_of`` (its DDL) gives them."""
    if not paths:
        if schema_of is None:
            raise LookupError(f"{location} has no partition to read")
        empty = spark.createDataFrame([], schema_of)
        return empty.withColumn(BATCH_COLUMN, F.lit(None).cast("int"))
    return partitions.read(spark, location, paths)
