"""Write, audit, publish on Spark (processes/step_kinds/spark_io.py, batches/partitions.py): a
batch rebuilt again and again, half of the attempts dying in the middle of their write, is
seen by its readers (a downstream step's read, the table's published partitions) only as
it was or as it is now, never half written and never missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.readwriter import DataFrameWriter

from batches import partitions
from batches.models import HiveTable, Partition
from processes import orchestrator, replay
from processes.models import ExecState, Property
from processes.step_kinds import StepContext
from processes.step_kinds.spark_io import read_table
from tests.helpers.jobs import build_job, callable_step, sql_step
from tests.helpers.spark import published

pytestmark = pytest.mark.django_db
REBUILDS = 20


class WorkerLost(RuntimeError):
    pass


@pytest.fixture
def chain(team, tmp_path, settings):
    """feed (a batch a run) -> build (``lake.counted``: ``range(n)`` of it) -> report."""
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    feed = build_job(team, "feed", [callable_step("feed_0")])
    query = "SELECT id FROM range(100) WHERE {target_batch_id} > 0"
    build = build_job(
        team, "build", [sql_step("build_0", query, output="lake.counted", upstream=[feed])]
    )
    report = build_job(team, "report", [callable_step("report_0", upstream=[build])])
    for job in (feed, build):
        assert orchestrator.run_job(job.pk).succeeded
    return feed, build, report


def test_a_batch_rebuilt_twenty_times_with_writes_dying_midway_is_seen_old_or_new(
    chain, spark, monkeypatch
):
    _feed, build, report = chain
    table = HiveTable.objects.get(dbname="lake", table_name="counted")
    (batch,) = Partition.objects.filter(table=table).values_list("batch_id", flat=True)
    query = Property.objects.get(process__parent=build, config_group="sql", key="query")
    # A step of the downstream job reading the batch, as it does when it runs.
    downstream = StepContext(
        step=report.steps.get(),
        job_run_id=0,
        step_run_id=0,
        target_batch_id=0,
        batch_ids=[batch],
        files=[],
    )
    seen: list[tuple[str, int, int]] = []  # (when, what a downstream step read, published)

    def look(when: str) -> None:
        seen.append(
            (
                when,
                read_table(downstream, spark, "lake.counted", [batch]).count(),
                published(spark, table).count(),
            )
        )

    write = DataFrameWriter.parquet
    dying = {"now": False}

    def parquet(self, path, *args, **kwargs):
        if "/counted/" not in str(path):
            return write(self, path, *args, **kwargs)
        if dying["now"]:
            # Half of the rows' files land in the attempt's folder, then the worker dies.
            frame = self._df
            write(frame.limit(frame.count() // 2).write.mode("overwrite"), path)
            look("mid-write, dying")
            raise WorkerLost("the worker died in the middle of the write")
        result = write(self, path, *args, **kwargs)
        look("written, not published")
        return result

    monkeypatch.setattr(DataFrameWriter, "parquet", parquet)

    counts = [100]
    for rebuild in range(REBUILDS):
        dying["now"] = rebuild % 2 == 0
        rows = 101 + rebuild
        Property.objects.filter(pk=query.pk).update(
            value=f"SELECT id FROM range({rows}) WHERE {{target_batch_id}} > 0"
        )
        replay.put_back(replay.plan_reprocess_batch(batch))
        outcome = orchestrator.run_job(build.pk)
        while not outcome.succeeded and not dying["now"]:
            outcome = orchestrator.run_job(build.pk)  # pragma: no cover - retried, not dying
        if dying["now"]:
            assert not outcome.succeeded
            assert "the worker died in the middle of the write" in outcome.error
            dying["now"] = False
            outcome = orchestrator.run_job(build.pk)  # its re-run, which writes it whole
            assert outcome.succeeded, outcome.error
        counts.append(rows)
        look(f"rebuild {rebuild + 1} published")
        assert seen[-1][1:] == (rows, rows)

    # Every look saw the batch as it was published last, or as it is now: never a half.
    published_before = 100
    for when, downstream_saw, catalog_saw in seen:
        assert downstream_saw == catalog_saw, when
        assert catalog_saw in counts, (when, catalog_saw)
        if when.startswith("rebuild"):
            published_before = catalog_saw
        else:
            assert catalog_saw == published_before, (when, catalog_saw, published_before)
    assert sum(1 for when, *_ in seen if when == "mid-write, dying") == REBUILDS // 2

    # The dead attempts' files and, after the grace, the replaced ones' are removed.
    attempts = Partition.objects.filter(table=table)
    assert attempts.filter(state=Partition.State.PUBLISHED).count() == 1
    dead = list(attempts.filter(step_run__exec_state_id__in=ExecState.failed()))
    assert len(dead) == REBUILDS // 2
    partitions.remove_unused()
    assert not any(Path(p.location).exists() for p in dead)


def test_a_table_written_outside_bdre_is_read_as_its_folders_are(chain, spark, team, tmp_path):
    """A table registered over folders BDRE did not write by attempts (written elsewhere,
    or before attempts had folders of their own): every batch_id=<n> folder is a batch."""
    from tests.helpers.factories import HiveTableFactory

    _feed, _build, report = chain
    folder = tmp_path / "warehouse" / "outside"
    spark.range(4).write.parquet(str(folder / "batch_id=1"))
    spark.range(2).write.parquet(str(folder / "batch_id=2"))
    HiveTableFactory(
        bus_domain=team.application, dbname="lake", table_name="outside", location=str(folder)
    )
    downstream = StepContext(
        step=report.steps.get(),
        job_run_id=0,
        step_run_id=0,
        target_batch_id=0,
        batch_ids=[1],
        files=[],
    )
    assert read_table(downstream, spark, "lake.outside", [1]).count() == 4
    assert read_table(downstream, spark, "lake.outside").count() == 6
    query = "SELECT count(*) AS n FROM lake.outside WHERE batch_id IN (2) AND {target_batch_id} > 0"
    job = build_job(team, "outside_sum", [sql_step("outside_sum_0", query, output="lake.sums")])
    assert orchestrator.run_job(job.pk).succeeded
    assert [r.n for r in published(spark, HiveTable.objects.get(table_name="sums")).collect()] == [
        2
    ]


def test_a_table_with_no_published_partition_reads_as_no_rows_with_its_columns(chain, spark, team):
    table = HiveTable.objects.get(dbname="lake", table_name="counted")
    Partition.objects.filter(table=table).update(state=Partition.State.DISCARDED)
    query = "SELECT count(*) AS n, max(id) AS top FROM lake.counted WHERE {target_batch_id} > 0"
    job = build_job(team, "count_none", [sql_step("count_none_0", query, output="lake.none")])
    assert orchestrator.run_job(job.pk).succeeded
    rows = published(spark, HiveTable.objects.get(table_name="none")).collect()
    assert [(r.n, r.top) for r in rows] == [(0, None)]


def test_a_store_bdre_cannot_list_keeps_its_partitions_in_place(chain, spark, team, monkeypatch):
    """HDFS, GCS, ADLS (here a local folder said to be one): written in place, no attempt
    recorded, and a unique rule across batches still reads the other batches' folders."""
    monkeypatch.setattr(partitions, "supported", lambda location: False)
    query = "SELECT {target_batch_id} AS day FROM range(1)"
    step = sql_step("days_0", query, output="lake.days", expect={"days.one": "fail: unique(day)"})
    job = build_job(team, "days", [step])
    for _ in range(2):
        assert orchestrator.run_job(job.pk).succeeded
    table = HiveTable.objects.get(table_name="days")
    assert not Partition.objects.filter(table=table).exists()
    folders = sorted(p.name for p in Path(table.location).glob("batch_id=*"))
    assert len(folders) == 2 and all(
        any(Path(table.location, f).glob("*.parquet")) for f in folders
    )
    assert spark.read.parquet(table.location).count() == 2


def test_a_step_writing_one_tables_batch_twice_is_refused_before_anything_is_written(chain, spark):
    from processes.step_kinds.spark_io import PartitionWrittenTwice, write_batch

    _feed, build, _report = chain
    context = StepContext(
        step=build.steps.get(),
        job_run_id=0,
        step_run_id=0,
        target_batch_id=1,
        batch_ids=[],
        files=[],
        outputs=["lake.counted"],
    )
    with pytest.raises(PartitionWrittenTwice, match=r"wrote batch 1 of lake\.counted twice"):
        write_batch(None, context, "lake", "counted")  # type: ignore[arg-type]


def test_no_partition_and_no_recorded_columns_is_a_clear_error():
    from processes.step_kinds.spark_io import read_partitions

    with pytest.raises(LookupError, match="/lake/t has no partition to read"):
        read_partitions(None, "/lake/t", [])  # type: ignore[arg-type]
