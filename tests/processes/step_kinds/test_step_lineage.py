"""The lineage of ``spark.load``, ``spark.cleanse``, ``spark.shred`` and ``spark.export``
(``lineage.steps``): each kind's column mapping, from the frames it built, recorded by its
run; and every table the demo pipeline writes is in the lineage graph."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from batches.models import File, HiveTable
from lineage import visibility
from lineage.extract import edge_functions, struct_columns
from lineage.models import LineageNode, LineageQuery, QueryKind
from lineage.steps import folder_of, record_step
from processes import demo, orchestrator
from processes.models import InstanceExec
from processes.registry import StepSpec
from processes.step_kinds import spark_export
from tests.helpers.factories import InstanceExecFactory, JobFactory, StepFactory, grant_root
from tests.helpers.jobs import CLEANSE, EXPORT, build_job, load_step, scan_step

pytestmark = pytest.mark.django_db

RULES = json.dumps(
    [
        {"name": "id", "type": "int", "required": True},
        {"name": "email", "type": "string", "pattern": "^[^@]+@[^@]+$"},
    ]
)


def edges(query: LineageQuery, target: str | None = None) -> set[tuple[str, str, tuple]]:
    """(source, target, labels) of the query's column edges (into the table ``target``)."""
    relations = query.relations.filter(target_node__container_node__isnull=False)
    if target is not None:
        relations = relations.filter(target_node__container_node__qualified_name=target)
    return {
        (
            r.src_node.qualified_name,
            r.target_node.qualified_name,
            tuple(edge_functions(r.dot_string)),
        )
        for r in relations.select_related("src_node", "target_node")
    }


def tables(query: LineageQuery) -> set[tuple[str, str]]:
    relations = query.relations.filter(target_node__container_node__isnull=True)
    return set(relations.values_list("src_node__qualified_name", "target_node__qualified_name"))


@pytest.fixture
def lake(tmp_path, settings, spark, team):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing = tmp_path / "landing"
    landing.mkdir()
    grant_root(team.group, landing)
    grant_root(team.group, tmp_path / "exports")
    return tmp_path


def orders_flow(team, lake):
    landing = lake / "landing"
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    flow = build_job(
        team,
        "orders",
        [
            load_step(
                "orders_0",
                "lake.orders_raw",
                format="csv",
                upstream=[ingest],
                schema="id STRING, email STRING, amount DOUBLE",
            ),
            StepSpec(
                "orders_1",
                CLEANSE,
                properties={
                    "cleanse": {
                        "source_table": "lake.orders_raw",
                        "rules": RULES,
                        "clean_table": "lake.orders",
                        "invalid_table": "lake.orders_invalid",
                    }
                },
            ),
            StepSpec(
                "orders_2",
                EXPORT,
                properties={
                    "export": {
                        "source_table": "lake.orders",
                        "format": "csv",
                        "location": (lake / "exports").as_uri() + "/",
                    }
                },
            ),
        ],
    )
    return ingest, flow


def query_of(step: str) -> LineageQuery:
    return LineageQuery.objects.filter(process__name=step).latest("id")


def test_load_cleanse_and_export_record_their_column_mappings(team, lake):
    landing = lake / "landing"
    (landing / "a.csv").write_text("id,email,amount\n1,a@x.org,2.5\n2,nope,4\n3,c@x.org,x,y\n")
    ingest, flow = orders_flow(team, lake)
    assert orchestrator.run_job(ingest.pk).succeeded
    outcome = orchestrator.run_job(flow.pk)
    assert outcome.succeeded, outcome.error
    folder = folder_of(File.objects.get().path)

    load = query_of("orders_0")
    assert (load.query_type_id, load.parse_error) == (QueryKind.SPARK_LOAD, "")
    assert load.query_string == (
        f"spark.load: csv files of {folder} into lake.orders_raw, lake.orders_raw_bad"
    )
    assert tables(load) == {(folder, "lake.orders_raw"), (folder, "lake.orders_raw_bad")}
    assert edges(load, "lake.orders_raw") == {
        (f"{folder}.id", "lake.orders_raw.id", ()),
        (f"{folder}.email", "lake.orders_raw.email", ()),
        (f"{folder}.amount", "lake.orders_raw.amount", ("cast",)),  # text to a declared double
    }
    assert edges(load, "lake.orders_raw_bad") == {
        (f"{folder}.{c}", "lake.orders_raw_bad.line", ("unparsed",))
        for c in ("id", "email", "amount")
    }
    raw = LineageNode.objects.get(qualified_name="lake.orders_raw", team=team.group)
    assert [c.display_name for c in raw.children.order_by("node_order")] == [
        "id",
        "email",
        "amount",
        "source_file",  # the file's name: a column of no source column
    ]

    cleanse = query_of("orders_1")
    assert (cleanse.query_type_id, cleanse.parse_error) == (QueryKind.SPARK_CLEANSE, "")
    assert tables(cleanse) == {
        ("lake.orders_raw", "lake.orders"),
        ("lake.orders_raw", "lake.orders_invalid"),
    }
    assert edges(cleanse, "lake.orders") == {
        ("lake.orders_raw.id", "lake.orders.id", ("cleanse rule", "cast")),
        ("lake.orders_raw.email", "lake.orders.email", ("cleanse rule",)),
        ("lake.orders_raw.amount", "lake.orders.amount", ()),
        ("lake.orders_raw.source_file", "lake.orders.source_file", ()),
    }
    assert edges(cleanse, "lake.orders_invalid") == {
        *{(f"lake.orders_raw.{c}", f"lake.orders_invalid.{c}", ()) for c in ("id", "email")},
        ("lake.orders_raw.amount", "lake.orders_invalid.amount", ()),
        ("lake.orders_raw.source_file", "lake.orders_invalid.source_file", ()),
        ("lake.orders_raw.id", "lake.orders_invalid.reason", ("cleanse rule",)),
        ("lake.orders_raw.email", "lake.orders_invalid.reason", ("cleanse rule",)),
    }
    # the load's target and the cleanse's source are one node: the graph goes on through it
    assert cleanse.relations.filter(src_node=raw).exists() and load.relations.filter(
        target_node=raw
    )

    export = query_of("orders_2")
    destination = (lake / "exports").as_uri()
    assert (export.query_type_id, export.parse_error) == (QueryKind.SPARK_EXPORT, "")
    assert tables(export) == {("lake.orders", destination)}
    assert edges(export) == {
        (f"lake.orders.{c}", f"{destination}.{c}", ())
        for c in ("id", "email", "amount", "source_file", "batch_id")
    }

    # A re-run of the flow on a new file: the same nodes, and relations of its own.
    nodes = LineageNode.objects.count()
    (landing / "b.csv").write_text("id,email,amount\n4,d@x.org,1\n")
    assert orchestrator.run_job(ingest.pk).succeeded
    assert orchestrator.run_job(flow.pk).succeeded
    assert LineageNode.objects.count() == nodes
    again = query_of("orders_0")
    assert again.pk != load.pk
    # no bad row this time: the bad table was not written, so no edge into it
    assert edges(again) == edges(load, "lake.orders_raw")
    assert LineageQuery.objects.filter(process__name="orders_1").count() == 2


def test_a_failing_lineage_never_fails_the_step(team, lake, monkeypatch):
    (lake / "landing" / "a.csv").write_text("id,email,amount\n1,a@x.org,2.5\n")
    ingest, flow = orders_flow(team, lake)

    def broken(*args, **kwargs):
        raise RuntimeError("no schema today")

    monkeypatch.setattr(spark_export, "lineage", broken)
    assert orchestrator.run_job(ingest.pk).succeeded
    outcome = orchestrator.run_job(flow.pk)
    assert outcome.succeeded, outcome.error
    assert InstanceExec.objects.get(process__name="orders_2").counters["rows_out"] == 1
    export = query_of("orders_2")
    assert export.parse_error == "lineage failed: no schema today"
    assert not export.relations.exists()


def test_an_export_to_a_database_names_its_table_without_credentials(team, spark):
    step = StepFactory(parent=JobFactory(bus_domain=team.application), bus_domain=team.application)
    frame = spark.createDataFrame([], "id int, name string, batch_id int")  # schema only
    destination = "jdbc:postgresql://db:5432/app#public.names"
    query = record_step(
        "spark.export",
        QueryKind.SPARK_EXPORT,
        process_id=step.pk,
        run_id=InstanceExecFactory(process=step).pk,
        describe=lambda: spark_export.lineage("lake.names", frame, destination, cast=("batch_id",)),
    )
    assert query is not None and query.parse_error == ""
    assert edges(query) == {
        ("lake.names.id", f"{destination}.id", ()),
        ("lake.names.name", f"{destination}.name", ()),
        ("lake.names.batch_id", f"{destination}.batch_id", ("cast",)),
    }


def aged(folder) -> None:
    """The demo's scan waits for files 5 s old: make the files older."""
    past = time.time() - 120
    for path in folder.iterdir():
        os.utime(path, (past, past))


def test_every_table_the_demo_pipeline_writes_is_in_its_lineage(tmp_path, settings, spark):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    settings.BDRE_LANDING = tmp_path / "landing"
    setup = demo.set_up_demo()
    landing = demo.landing_folder(setup.team)
    demo.generate_landing(landing, files=1, events=300, in_flight=False)
    aged(landing)
    for job in (setup.ingest, setup.shred):
        assert orchestrator.run_job(job.pk).succeeded
    # The next day's file closes the first day, which the daily summary then sums.
    next_day = demo.FIRST_DAY + timedelta(days=1)
    demo.generate_landing(landing, files=1, events=300, day=next_day, in_flight=False)
    demo.generate_pages(landing)
    aged(landing)
    for job in setup.jobs:
        outcome = orchestrator.run_job(job.pk)
        assert outcome.succeeded, (job.name, outcome.error)
    user = get_user_model().objects.get(username=setup.username)

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
    atomic = edges(shred, "default.atomic_events")
    assert (f"{folder}.event_id", "default.atomic_events.event_id", ("dedup",)) in atomic
    assert (f"{folder}.page_url", "default.atomic_events.page_url", ()) in atomic
    for entity in entity_tables:
        into = edges(shred, entity)
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
    assert ("default.daily_page_views.day", f"{exported}.day", ()) in edges(
        query_of("clickstream_daily_export_csv"), exported
    )
    cleanse = edges(query_of("clickstream_pages_cleanse"), "default.pages")
    assert any(s == "default.pages_raw.price" and t == "default.pages.price" for s, t, _ in cleanse)
    assert (
        query_of("clickstream_pages_load")
        .relations.filter(target_node__container_node__qualified_name="default.pages_raw")
        .exists()
    )
