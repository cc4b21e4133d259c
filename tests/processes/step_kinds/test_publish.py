"""Write, audit, publish on Spark (processes/step_kinds/spark_io.py, batches/partitions.py): a
batch rebuilt again and again, half of the attempts dying in the middle of their write, is
seen by its readers (a downstream step's read, the table's published partitions) only as
it was or as it is now, never half written and never missing."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from pyspark.sql.readwriter import DataFrameWriter

from batches import partitions
from batches.models import HiveTable, Partition
from processes import orchestrator, replay, tasks
from processes.models import ExecState, Property
from processes.step_kinds import StepContext
from processes.step_kinds.spark_io import read_table
from tests.helpers.jobs import build_job, callable_step, sql_step
from tests.helpers.spark import one_jvm_only, published

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


@pytest.fixture
def hadoop_store(spark, tmp_path, settings):
    """A table store only Hadoop reaches: ``hdfs://<name>/tables``, which Hadoop's view
    filesystem mounts on a folder of the test's (Python cannot open an ``hdfs://`` URI;
    the test looks at the folder to see what BDRE did through Hadoop)."""
    name = f"bdre-{uuid.uuid4().hex[:12]}"
    folder = tmp_path / "hdfs"
    folder.mkdir()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("fs.hdfs.impl", "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme")
    hadoop.set(f"fs.viewfs.mounttable.{name}.link./tables", folder.as_uri())
    settings.BDRE_TABLE_STORE = f"hdfs://{name}/tables"
    yield f"hdfs://{name}/tables", folder
    hadoop.unset("fs.hdfs.impl")


def files_under(folder: Path) -> list[str]:
    return sorted(
        str(f.relative_to(folder)) for f in folder.rglob("*") if f.is_file() and f.name[0] != "."
    )


# The view filesystem's mount is this process's JVM's: a cluster's executors or a Connect
# server have their own configuration.
@one_jvm_only
def test_tables_on_a_store_only_hadoop_reaches_are_written_by_attempts(
    chain, spark, team, hadoop_store, settings, eager, monkeypatch
):
    """HDFS, GCS, ADLS: each attempt in a folder of its own, published whole, a table
    written in place before adopted, and the unused folders removed by the Spark queue's
    worker, all through the session's Hadoop FileSystem."""
    from tests.helpers.factories import BatchFactory, HiveTableFactory

    feed, _build, _report = chain
    store, folder = hadoop_store
    location = f"{store}/team-{team.group.pk}/lake/days"
    local = folder / f"team-{team.group.pk}" / "lake" / "days"
    # A batch its step wrote in place before attempts had folders of their own.
    old = BatchFactory(bus_domain=team.application).pk
    spark.range(3).write.parquet(f"{location}/batch_id={old}")
    HiveTableFactory(
        bus_domain=team.application,
        dbname="lake",
        table_name="days",
        location=location,
        batch_id_partition_col="batch_id",
    )
    step = sql_step(
        "days_0",
        "SELECT {target_batch_id} AS id FROM range(1)",
        output="lake.days",
        expect={"days.one": "fail: unique(id)"},
        upstream=[feed],
    )
    job = build_job(team, "days", [step])
    # Written from a pool of its own, whose sessions reach the store.
    settings.BDRE_SPARK_QUEUES = [settings.BDRE_SPARK_QUEUE, "spark-hdfs"]
    Property.objects.create(
        process=job.steps.get(), config_group="run", key="spark_queue", value="spark-hdfs"
    )
    assert orchestrator.run_job(feed.pk).succeeded

    write = DataFrameWriter.parquet

    def dying(self, path, *args, **kwargs):
        write(self, path, *args, **kwargs)
        raise WorkerLost("the worker died after the write")

    with monkeypatch.context() as patched:
        patched.setattr(DataFrameWriter, "parquet", dying)
        failed = orchestrator.run_job(job.pk)
    assert not failed.succeeded and "the worker died" in failed.error
    first = orchestrator.run_job(job.pk)
    assert first.succeeded, first.error
    batch = first.target_batch_id
    replay.put_back(replay.plan_reprocess_batch(batch))
    second = orchestrator.run_job(job.pk)
    assert second.succeeded, second.error

    table = HiveTable.objects.get(dbname="lake", table_name="days")
    attempts = {p.step_run_id: p for p in Partition.objects.filter(table=table)}
    legacy = attempts.pop(None)
    assert (legacy.batch_id, legacy.state) == (old, Partition.State.PUBLISHED)
    assert legacy.location == f"{location}/batch_id={old}/legacy"
    dead, replaced, latest = (attempts[k] for k in sorted(attempts))
    assert dead.state == Partition.State.WRITTEN
    assert (replaced.state, latest.state) == (Partition.State.REPLACED, Partition.State.PUBLISHED)
    assert latest.location.startswith(f"{location}/batch_id={batch}/run-")
    data = [f for f in files_under(local) if f.endswith(".parquet")]
    assert latest.bytes == sum(
        (local / f).stat().st_size
        for f in data
        if f.startswith(latest.location[len(location) + 1 :])
    )
    assert sorted(r.id for r in published(spark, table).collect()) == [0, 1, 2, batch]

    # A table nobody has written since the upgrade: its command adopts it through Hadoop too.
    idle = f"{store}/team-{team.group.pk}/lake/idle"
    spark.range(2).write.parquet(f"{idle}/batch_id={old}")
    HiveTableFactory(bus_domain=team.application, dbname="lake", table_name="idle", location=idle)
    out = io.StringIO()
    call_command("adopt_partitions", stdout=out)
    assert out.getvalue().splitlines() == [
        "lake.idle: adopted batch " + str(old),
        "1 partition(s) adopted.",
    ]
    assert published(spark, HiveTable.objects.get(table_name="idle")).count() == 2

    # The reaper's own pass reaches no Hadoop store: a Spark worker's does, once the grace
    # is over, and leaves what readers see.
    settings.BDRE_PARTITION_GRACE_SECONDS = 0
    assert partitions.remove_unused() == []
    assert orchestrator.removals_by_queue() == {"spark-hdfs": [dead.pk, replaced.pk]}
    tasks.reap_expired_runs()
    assert not partitions.left_for_spark()
    kept = {p.location[len(location) + 1 :] for p in (legacy, latest)}
    assert {f.rsplit("/", 1)[0] for f in files_under(local)} == kept
    assert sorted(r.id for r in published(spark, table).collect()) == [0, 1, 2, batch]


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
