"""The demo's pipeline run once in this test process, on its Spark session, and what that run
proves: every table it writes is in the lineage graph; a partition traces back to its
landing files and a file forward to everything it fed; a failing step's run page shows its
traceback and Spark's lines; a file reprocessed rebuilds exactly its downstream partitions.

The pipeline (scan -> shred with the four deduplication strategies and a manifest -> daily
SQL -> CSV export, and the page list's load and cleanse) takes minutes of Spark, so the run
is the module's (``demo_run``), not each test's (docs/testing.md, "Helpers and fixtures"). Its
rows are in a transaction rolled back after the module's last test, and each test's own
changes in a savepoint inside it. What no savepoint undoes is the warehouse: the tests that
write it come last, the reprocess, which checks every file of it, last of all."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client, override_settings

from batches import queue
from batches.models import BatchConsumpQueue, File, HiveTable
from lineage import visibility
from lineage.extract import struct_columns
from lineage.graphs import provenance
from lineage.models import QueryKind
from lineage.steps import folder_of
from processes import demo, orchestrator, registry
from processes.models import InstanceExec
from tests.helpers.api import api_as
from tests.helpers.lineage import column_edges, query_of
from tests.helpers.spark import published

pytestmark = [pytest.mark.spark, pytest.mark.django_db]

NEXT_DAY = demo.FIRST_DAY + timedelta(days=1)


@dataclass(frozen=True)
class DemoRun:
    setup: demo.DemoSetup
    first_round: list[Path]  # the first day's landing files
    first_shred: orchestrator.RunOutcome  # the shred of the first round alone
    runs: dict[str, orchestrator.RunOutcome]  # every job's run after the second round


def landed_a_minute_ago(folder: Path) -> None:
    """The demo's scan takes files at least 5 seconds old; these were written whole."""
    past = time.time() - 60
    for path in folder.iterdir():
        os.utime(path, (past, past))


@pytest.fixture(scope="module")
def demo_run(django_db_setup, django_db_blocker, spark, tmp_path_factory) -> Iterator[DemoRun]:
    """Two rounds of landing files: the first day's (two files), shredded alone; then the
    next day's (one file repeating events of the first, which closes the first day) and the
    shop's page list, and every job run once in order."""
    root = tmp_path_factory.mktemp("demo-run")
    with (
        django_db_blocker.unblock(),
        override_settings(
            VAR_DIR=root,
            BDRE_LANDING=root / "landing",
            BDRE_WAREHOUSE=root / "warehouse",
            BDRE_LOG_DIR=root / "step-logs",
        ),
    ):
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            setup = demo.set_up_demo()
            folder = demo.landing_folder(setup.team)
            first_round, seen = demo.generate_landing(folder, files=2, events=300, in_flight=False)
            landed_a_minute_ago(folder)
            assert orchestrator.run_job(setup.ingest.pk).succeeded
            first_shred = orchestrator.run_job(setup.shred.pk)
            assert first_shred.succeeded, first_shred.error
            demo.generate_landing(
                folder, files=1, events=300, day=NEXT_DAY, repeat_from=seen, in_flight=False
            )
            demo.generate_pages(folder)
            landed_a_minute_ago(folder)
            runs = {}
            for job in setup.jobs:  # upstream before downstream
                runs[job.name] = orchestrator.run_job(job.pk)
                assert runs[job.name].succeeded, (job.name, runs[job.name].error)
            yield DemoRun(setup, first_round, first_shred, runs)
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


# --- lineage ----------------------------------------------------------------------------------


def test_every_table_the_demo_pipeline_writes_is_in_its_lineage(demo_run):
    setup = demo_run.setup
    user = User.objects.get(username=setup.username)
    written = HiveTable.objects.filter(bus_domain__team=setup.team)
    names = {f"{t.dbname}.{t.table_name}" for t in written}
    entity_tables = {n for n in names if n.startswith("default.com_")}
    assert {
        "default.atomic_events",
        "default.atomic_events_bad",
        "default.atomic_events_bad_entities",
        "default.daily_page_views",
        "default.pages_raw",
        "default.pages",
        "default.pages_invalid",
    } < names and entity_tables
    nodes = visibility.nodes(user)
    shown = visibility.relations(user)
    for table in written:
        node = nodes.get(container_node=None, qualified_name=f"{table.dbname}.{table.table_name}")
        assert shown.filter(target_node=node).exists(), f"nothing leads to {node}"
        columns = set(nodes.filter(container_node=node).values_list("display_name", flat=True))
        # batch_id, the partition column of every table, has a node where a step read it
        # (the export hands it on); the ddl is of the partitions' files, without it.
        assert set(struct_columns(table.ddl)) == columns - {"batch_id"}, node

    shred = query_of("clickstream_shred_events")
    folder = folder_of(File.objects.filter(team=setup.team).first().path)
    assert (shred.query_type_id, shred.parse_error) == (QueryKind.SPARK_SHRED, "")
    atomic = column_edges(shred, "default.atomic_events")
    assert (f"{folder}.event_id", "default.atomic_events.event_id", ("dedup",)) in atomic
    assert (f"{folder}.page_url", "default.atomic_events.page_url", ()) in atomic
    for entity in entity_tables:
        into = column_edges(shred, entity)
        sources = {s.rsplit(".", 1)[1] for s, t, _ in into if t == f"{entity}.data"}
        assert sources and sources <= {"contexts", "derived_contexts", "unstruct_event"}
        assert (f"{folder}.event_id", f"{entity}.root_id", ("dedup",)) in into
    # the daily summary reads the node the shred wrote: one graph from the files to the day
    daily = query_of("clickstream_daily_summary")
    source = daily.relations.get(
        target_node__qualified_name="default.daily_page_views.day", indirect=""
    )
    assert source.src_node.qualified_name == "default.atomic_events.collector_tstamp"
    # page_views counts rows: the filter on event and the day's group-by decide which
    assert {
        (r.src_node.qualified_name, r.indirect)
        for r in daily.relations.filter(
            target_node__qualified_name="default.daily_page_views.page_views"
        )
    } >= {
        ("default.atomic_events.event", "filter"),
        ("default.atomic_events.collector_tstamp", "group by"),
    }
    assert shred.relations.filter(target_node=source.src_node).exists()
    # ... and on to the CSV files the export hands on, and the page list's load and cleanse.
    exported = demo.export_folder(setup.team).as_uri()
    assert ("default.daily_page_views.day", f"{exported}.day", ()) in column_edges(
        query_of("clickstream_daily_export_csv"), exported
    )
    cleanse = column_edges(query_of("clickstream_pages_cleanse"), "default.pages")
    assert any(s == "default.pages_raw.price" and t == "default.pages.price" for s, t, _ in cleanse)
    assert (
        query_of("clickstream_pages_load")
        .relations.filter(target_node__container_node__qualified_name="default.pages_raw")
        .exists()
    )


# --- provenance -------------------------------------------------------------------------------


def test_a_partition_traces_back_to_its_files_and_a_file_forward_to_its_partitions(demo_run):
    summed = demo_run.runs["clickstream_daily"]
    exported = demo_run.runs["clickstream_daily_export"]
    shredded = demo_run.first_shred
    trace = provenance.trace(summed.target_batch_id, provenance.UP)
    # The first day's summary is of the first round's files only: the next day's is not
    # closed yet.
    assert sorted(path.rsplit("/", 1)[-1] for _, path in trace.upstream_files()) == sorted(
        f.name for f in demo_run.first_round
    )
    jobs = {trace.batches[h.target].job for h in trace.hops}
    assert jobs == {"clickstream_shred", "clickstream_daily"}
    assert {h.step for h in trace.hops} == {
        "clickstream_shred_events",
        "clickstream_daily_summary",
    }
    assert shredded.target_batch_id in {h.source for h in trace.hops}

    landing = File.objects.get(path__endswith=demo_run.first_round[0].name)
    forward = provenance.from_file(landing.pk)
    assert forward.downstream_batches() == sorted(
        [shredded.target_batch_id, summed.target_batch_id, exported.target_batch_id]
    )
    assert forward.batches[summed.target_batch_id].job == "clickstream_daily"
    assert forward.batches[exported.target_batch_id].job == "clickstream_daily_export"


# --- a failing step's page (writes the warehouse: after the tests that only read) ------------


def test_a_failed_demo_step_shows_its_traceback_and_spark_lines_on_its_run_page(demo_run):
    """The demo's daily step, given a statement that fails while Spark runs it: its run page
    shows the step's log with the traceback, Spark's error and the Spark job's lines."""
    setup = demo_run.setup
    # The next day closed, as the day after's first batch would close it.
    queue.close_days(setup.shred, before=(NEXT_DAY + timedelta(days=1)).isoformat())
    registry.set_properties(
        setup.daily.steps.get(),
        {
            "sql": {
                "query": "SELECT raise_error(concat('no page views on ', event)) AS day "
                "FROM atomic_events WHERE batch_id IN ({batch_ids})"
            }
        },
    )
    outcome = orchestrator.run_job(setup.daily.pk)
    assert not outcome.succeeded

    client = Client()
    client.force_login(User.objects.get(username=demo.DEMO_USERNAME))
    page = client.get(f"/runs/{outcome.instance_exec_id}/").content.decode()
    assert "Traceback (most recent call last):" in page
    assert "no page views on " in page  # Spark's own error, raised in a task
    assert "bdre.spark: Spark stage " in page and " failed" in page
    step_run = InstanceExec.objects.get(parent_id=outcome.instance_exec_id)
    assert step_run.spark_application_id and step_run.spark_application_id in page
    # The whole log, its first lines too, is the page's download link.
    assert f"/runs/{outcome.instance_exec_id}/log/?step={step_run.pk}" in page
    text = client.get(f"/runs/{outcome.instance_exec_id}/log/?step={step_run.pk}").content.decode()
    assert "bdre.spark: Spark application " in text and "Traceback" in text


# --- reprocessing (rewrites the warehouse: the module's last test) -----------------------------


def table_files(location: str) -> dict[str, float]:
    """Each data file of a table (or an export's folder), by its path below it, with when it
    was written."""
    root = Path(location)
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for pattern in ("*.parquet", "*.csv")
        for p in root.rglob(pattern)
    }


def csv_rows(location: str) -> list[tuple[str, str]]:
    """An export's rows, by partition: (batch_id=N, line)."""
    root = Path(location)
    return sorted(
        (p.parent.name, line)
        for p in root.rglob("*.csv")
        for line in p.read_text().splitlines()[1:]
    )


def demo_tables(spark, application) -> dict[str, list]:
    return {
        f"{t.dbname}.{t.table_name}": sorted(
            (tuple(r) for r in published(spark, t.location).collect()), key=repr
        )
        for t in HiveTable.objects.filter(bus_domain=application)
    }


def test_reprocessing_one_demo_file_replaces_exactly_its_downstream_partitions(
    demo_run, spark, queued, drive, committed
):
    """One file of the first round reprocessed: its shred batch and the daily batch made of
    it are built again, with the same rows (the manifest's rerun rule: a batch rebuilt is
    not a duplicate of itself), and no other partition is written."""
    setup = demo_run.setup
    shred, daily, export = setup.shred, setup.daily, setup.export
    shred_counters = [
        r.counters for r in InstanceExec.objects.filter(process__parent=shred).order_by("id")
    ]
    assert shred_counters[1]["dup_cross_batch_natural"] > 0  # the second round repeats

    tables_before = demo_tables(spark, setup.application)
    locations = {
        f"{t.dbname}.{t.table_name}": t.location
        for t in HiveTable.objects.filter(bus_domain=setup.application)
    }
    locations["export"] = str(demo.export_folder(setup.team))
    files_before = {name: table_files(loc) for name, loc in locations.items()}
    export_rows_before = csv_rows(locations["export"])
    assert export_rows_before  # the first day's summary, exported
    first_file = File.objects.get(path__endswith=demo_run.first_round[0].name)

    client = api_as(User.objects.get(username=demo.DEMO_USERNAME))
    url = f"/api/v1/files/{first_file.pk}/reprocess/"
    plan = client.post(url, {"preview": True}, format="json").json()
    assert [r["job"] for r in plan["rebuilds"]] == [
        "clickstream_shred",
        "clickstream_daily",
        "clickstream_daily_export",
    ]
    rebuilt = {r["target_batch_id"] for r in plan["rebuilds"]}
    planned = set(plan["partitions"])
    # The export writes the daily batch it read: that partition of its folder is replaced.
    daily_batch = plan["rebuilds"][1]["target_batch_id"]
    export_partition = f"{demo.export_folder(setup.team).as_uri()}/batch_id={daily_batch}"
    assert export_partition in planned
    assert f"default.atomic_events/batch_id={plan['batches'][0]}" in planned
    with committed():
        assert client.post(url, {}, format="json").status_code == 202
    drive()  # the shred's rebuild, then the daily and export jobs it triggers (on_upstream)

    assert [r.trigger for r in InstanceExec.objects.filter(process=shred).order_by("id")] == [
        "manual",
        "manual",
        "reprocess",
    ]
    for job in (daily, export):
        assert InstanceExec.objects.filter(process=job).order_by("-id").first().trigger == (
            "replay"
        )
    # All that waits is the second day's shred batch, for its day to close.
    waiting = BatchConsumpQueue.objects.filter(process__parent__in=[shred, daily, export])
    assert [(row.process.parent_id, row.batch_marking) for row in waiting] == [
        (daily.pk, NEXT_DAY.isoformat())
    ]
    # The same rows, nothing lost and nothing twice: the file did not change.
    assert demo_tables(spark, setup.application) == tables_before
    # Exactly the planned partitions were written again; every other file is untouched.
    for name, location in locations.items():
        after = table_files(location)
        touched = {daily_batch} if name == "export" else rebuilt
        for path, written in files_before[name].items():
            batch = int(path.split("batch_id=")[1].split("/")[0])
            if batch in touched:
                assert name == "export" or f"{name}/batch_id={batch}" in planned, (name, path)
            else:
                assert after.get(path) == written, (name, path)
        for path in after:
            batch = int(path.split("batch_id=")[1].split("/")[0])
            assert batch in touched or path in files_before[name], (name, path)
    assert csv_rows(locations["export"]) == export_rows_before
