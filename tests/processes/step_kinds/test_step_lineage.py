"""The lineage of ``spark.load``, ``spark.cleanse``, ``spark.shred`` and ``spark.export``
(``lineage.steps``): each kind's column mapping, from the frames it built, recorded by its
run. That every table the demo pipeline writes is in the lineage graph is
tests/processes/test_demo_run.py's."""

from __future__ import annotations

import json

import pytest

from batches.models import File
from lineage.models import LineageNode, LineageQuery, QueryKind
from lineage.steps import folder_of, record_step
from processes import orchestrator
from processes.models import InstanceExec
from processes.registry import StepSpec
from processes.step_kinds import spark_export
from tests.helpers.factories import InstanceExecFactory, JobFactory, StepFactory, grant_root
from tests.helpers.jobs import CLEANSE, EXPORT, build_job, load_step, scan_step
from tests.helpers.lineage import column_edges, query_of

pytestmark = pytest.mark.django_db

RULES = json.dumps(
    [
        {"name": "id", "type": "int", "required": True},
        {"name": "email", "type": "string", "pattern": "^[^@]+@[^@]+$"},
    ]
)


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
    assert column_edges(load, "lake.orders_raw") == {
        (f"{folder}.id", "lake.orders_raw.id", ()),
        (f"{folder}.email", "lake.orders_raw.email", ()),
        (f"{folder}.amount", "lake.orders_raw.amount", ("cast",)),  # text to a declared double
    }
    assert column_edges(load, "lake.orders_raw_bad") == {
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
    assert column_edges(cleanse, "lake.orders") == {
        ("lake.orders_raw.id", "lake.orders.id", ("cleanse rule", "cast")),
        ("lake.orders_raw.email", "lake.orders.email", ("cleanse rule",)),
        ("lake.orders_raw.amount", "lake.orders.amount", ()),
        ("lake.orders_raw.source_file", "lake.orders.source_file", ()),
    }
    assert column_edges(cleanse, "lake.orders_invalid") == {
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
    assert column_edges(export) == {
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
    assert column_edges(again) == column_edges(load, "lake.orders_raw")
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
    assert column_edges(query) == {
        ("lake.names.id", f"{destination}.id", ()),
        ("lake.names.name", f"{destination}.name", ()),
        ("lake.names.batch_id", f"{destination}.batch_id", ("cast",)),
    }
