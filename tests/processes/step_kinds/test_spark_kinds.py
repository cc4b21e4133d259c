"""``spark.load``, ``spark.cleanse``, ``spark.sql`` and ``spark.export``: transforms on tiny
frames, then each kind end to end on a claimed batch through the lifecycle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from batches.models import File, HiveTable
from lineage import openlineage
from lineage.models import LineageQuery, LineageRelation, QueryKind
from lineage.steps import jdbc_name
from processes import orchestrator, replay
from processes.models import InstanceExec
from processes.registry import StepSpec
from processes.step_kinds import spark_cleanse, spark_sql
from tests.helpers.factories import grant_root
from tests.helpers.jobs import (
    CLEANSE,
    EXPORT,
    build_job,
    callable_step,
    load_step,
    scan_step,
    sql_step,
)
from tests.helpers.lineage import deeply_nested
from tests.helpers.openlineage_schema import validate_run_event
from tests.helpers.spark import one_jvm_only, published

pytestmark = pytest.mark.django_db

RULES = json.dumps(
    [
        {"name": "id", "type": "int", "required": True},
        {"name": "email", "type": "string", "pattern": "^[^@]+@[^@]+$"},
        {"name": "amount", "type": "double"},
    ]
)


def test_validate_splits_valid_and_invalid_rows_with_every_reason(spark):
    df = spark.createDataFrame(
        [("1", "a@x.org", "2.5"), ("", "nope", "x"), ("3", None, None)],
        "id string, email string, amount string",
    )
    valid, invalid = spark_cleanse.validate(df, spark_cleanse.parse_rules(RULES))
    assertDataFrameEqual(
        valid,
        spark.createDataFrame(
            [(1, "a@x.org", 2.5), (3, None, None)], "id int, email string, amount double"
        ),
    )
    (bad,) = invalid.collect()
    assert (
        bad["reason"]
        == "id is required; email does not match ^[^@]+@[^@]+$; amount is not a double"
    )


def test_bad_rules_are_a_clear_error():
    with pytest.raises(ValueError, match="unknown type"):
        spark_cleanse.parse_rules('[{"name": "x", "type": "money"}]')
    with pytest.raises(ValueError, match="JSON list"):
        spark_cleanse.parse_rules("not json")


def test_sql_placeholders():
    assert spark_sql.render("x IN ({batch_ids}) AND y = {target_batch_id}", [3, 4], 9) == (
        "x IN (3, 4) AND y = 9"
    )


@pytest.fixture
def lake(tmp_path, settings, spark, team):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing = tmp_path / "landing"
    landing.mkdir()
    grant_root(team.group, landing)
    grant_root(team.group, tmp_path / "exports")
    return tmp_path


def counters(step_name: str) -> dict:
    return InstanceExec.objects.filter(process__name=step_name).order_by("-id").first().counters


@pytest.mark.representative  # the cluster tests run it again on each target
def test_load_cleanse_sql_and_export_end_to_end(
    team, lake, spark, settings, django_capture_on_commit_callbacks
):
    settings.OPENLINEAGE_FILE = str(lake / "openlineage.jsonl")
    landing = lake / "landing"
    (landing / "orders-1.csv").write_text("id,email,amount\n1,a@x.org,2.5\n2,b@x.org,4\n,bad,x\n")
    (landing / "orders-2.csv").write_text(
        'id,email,amount\n3,"c@x.org",1.5\n4,d@x.org,"9,5"\n5,e@x.org,1,one field too many\n'
    )
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    export_dir = lake / "exports"
    orders = build_job(
        team,
        "orders",
        [
            load_step(
                "orders_0",
                "lake.orders_raw",
                format="csv",
                upstream=[ingest],
                schema="id STRING, email STRING, amount STRING",
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
            sql_step(
                "orders_2",
                "SELECT count(*) AS orders, sum(amount) AS total FROM lake.orders "
                "WHERE batch_id IN ({batch_ids})",
                output="lake.order_totals",
            ),
            StepSpec(
                "orders_3",
                EXPORT,
                properties={
                    "export": {
                        "source_table": "lake.order_totals",
                        "format": "csv",
                        "location": export_dir.as_uri(),
                    }
                },
            ),
        ],
    )
    assert orchestrator.run_job(ingest.pk).succeeded
    with django_capture_on_commit_callbacks(execute=True):
        outcome = orchestrator.run_job(orders.pk)
    assert outcome.succeeded, outcome.error
    load = counters("orders_0")
    assert (load["rows_in"], load["rows_out"], load["bad_rows"]) == (6, 5, 1)
    cleanse = counters("orders_1")
    assert (cleanse["rows_in"], cleanse["rows_out"], cleanse["bad_rows"]) == (5, 3, 2)
    totals = published(spark, HiveTable.objects.get(table_name="order_totals").location).collect()
    assert [(r["orders"], r["total"], r["batch_id"]) for r in totals] == [
        (3, 8.0, outcome.target_batch_id)
    ]
    exported = spark.read.option("header", "true").csv(str(export_dir)).collect()
    assert [(r["orders"], r["batch_id"]) for r in exported] == [("3", outcome.target_batch_id)]
    # The run keeps the files the export wrote, for its page.
    (written,) = InstanceExec.objects.get(process__name="orders_3").files_written
    folder = f"{export_dir.as_uri()}/batch_id={outcome.target_batch_id}/"
    assert written["path"].startswith(folder) and written["path"].endswith(".csv")
    assert written["bytes"] == Path(written["path"].removeprefix("file://")).stat().st_size > 0
    query = LineageQuery.objects.get(process__name="orders_2")
    assert query.query_string.endswith(f"WHERE batch_id IN ({outcome.target_batch_id})")
    assert query.parse_error == ""
    total = LineageRelation.objects.get(
        target_node__qualified_name="lake.order_totals.total", indirect=""
    )
    assert (total.src_node.qualified_name, total.dot_string) == (
        "lake.orders.amount",
        '[label="SUM"]',
    )
    bad = published(spark, HiveTable.objects.get(table_name="orders_raw_bad").location).collect()
    assert bad[0]["source_file"].endswith("orders-2.csv")
    assert InstanceExec.objects.get(process__name="orders_0").spark_application_id

    # OpenLineage: each step's datasets and the column lineage of its outputs
    events = [json.loads(line) for line in (lake / "openlineage.jsonl").read_text().splitlines()]
    for event in events:
        validate_run_event(event)
    done = {e["job"]["name"]: e for e in events if e["eventType"] == "COMPLETE"}
    names = {
        step: ([d["name"] for d in e["inputs"]], [d["name"] for d in e["outputs"]])
        for step, e in done.items()
    }
    assert names == {
        "orders.orders_0": ([str(landing)], ["lake.orders_raw", "lake.orders_raw_bad"]),
        "orders.orders_1": (["lake.orders_raw"], ["lake.orders", "lake.orders_invalid"]),
        "orders.orders_2": (["lake.orders"], ["lake.order_totals"]),
        "orders.orders_3": (["lake.order_totals"], [str(export_dir)]),
        "orders": ([], []),
    }
    # every step kind's recorded column relations (lineage.steps) reach its outputs
    lineage = {
        o["name"]: o["facets"]["columnLineage"]["fields"]
        for e in done.values()
        for o in e["outputs"]
    }
    assert set(lineage) == {
        "lake.orders_raw",
        "lake.orders_raw_bad",
        "lake.orders",
        "lake.orders_invalid",
        "lake.order_totals",
        str(export_dir),
    }
    assert lineage["lake.orders_raw"]["id"]["inputFields"][0]["name"] == str(landing)
    amount = lineage["lake.orders"]["amount"]["inputFields"][0]
    assert (amount["namespace"], amount["name"], amount["field"]) == (
        f"bdre-warehouse.team-{team.group.pk}",
        "lake.orders_raw",
        "amount",
    )
    assert lineage[str(export_dir)]["total"]["inputFields"][0]["name"] == "lake.order_totals"
    sql_output = done["orders.orders_2"]["outputs"][0]
    # The team's tables are in its own namespace: another team's lake.orders is another one.
    assert sql_output["namespace"] == f"bdre-warehouse.team-{team.group.pk}"
    namespace = f"bdre-warehouse.team-{team.group.pk}"
    # Which rows both outputs count and sum is the batch filter's: an indirect dependency.
    batches = {
        "namespace": namespace,
        "name": "lake.orders",
        "field": "batch_id",
        "transformations": [{"type": "INDIRECT", "subtype": "FILTER", "description": "filter"}],
    }
    assert sql_output["facets"]["columnLineage"]["fields"] == {
        "orders": {"inputFields": [batches]},
        "total": {
            "inputFields": [
                {
                    "namespace": namespace,
                    "name": "lake.orders",
                    "field": "amount",
                    "transformations": [
                        {"type": "DIRECT", "subtype": "AGGREGATION", "description": "SUM"}
                    ],
                },
                batches,
            ]
        },
    }
    assert {f["name"] for f in sql_output["facets"]["schema"]["fields"]} == {
        "orders",
        "total",
        "batch_id",
    }
    assert done["orders.orders_2"]["job"]["facets"]["sql"]["query"].startswith("SELECT count(*)")
    assert done["orders.orders_0"]["outputs"][0]["outputFacets"]["outputStatistics"] == {
        "_producer": openlineage.PRODUCER,
        "_schemaURL": openlineage.FACET_SCHEMAS["outputStatistics"],
        "rowCount": 5,
    }


def test_a_rerun_replaces_its_partition(team, lake, spark):
    landing = lake / "landing"
    (landing / "a.json").write_text('{"id": 1}\n{"id": 2}\n')
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    loader = build_job(
        team,
        "loader",
        [
            load_step("loader_0", "lake.things", format="json", upstream=[ingest]),
            callable_step("loader_1", "tests.processes.step_kinds.test_spark_kinds.fail_once"),
        ],
    )
    orchestrator.run_job(ingest.pk)
    FAILS.clear()
    first = orchestrator.run_job(loader.pk)
    assert not first.succeeded
    # can_recover skips the load on the re-run; force it to run again to prove idempotence.
    loader.steps.update(can_recover=False)
    second = orchestrator.run_job(loader.pk)
    assert second.succeeded and second.target_batch_id == first.target_batch_id
    rows = published(spark, HiveTable.objects.get(table_name="things").location)
    assert rows.count() == 2


FAILS: list[int] = []


def fail_once(context):
    if not FAILS:
        FAILS.append(1)
        raise RuntimeError("broke once")
    return {}


# An in-memory Derby database is one JVM's: a cluster's executors would write to their own.
@one_jvm_only
def test_export_to_a_jdbc_table(team, lake, spark):
    landing = lake / "landing"
    (landing / "a.tsv").write_text("id\tname\n1\tone\n2\ttwo\n")
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    url = f"jdbc:derby:memory:bdre{id(lake)};create=true"
    grant_root(team.group, url, server_type="jdbc")  # the database the superuser granted
    flow = build_job(
        team,
        "flow",
        [
            load_step("flow_0", "lake.names", format="tsv", upstream=[ingest]),
            StepSpec(
                "flow_1",
                EXPORT,
                properties={
                    "export": {
                        "source_table": "lake.names",
                        "format": "jdbc",
                        "jdbc_url": url,
                        "jdbc_table": "NAMES",
                        "jdbc_driver": "org.apache.derby.jdbc.EmbeddedDriver",
                    }
                },
            ),
        ],
    )
    orchestrator.run_job(ingest.pk)
    outcome = orchestrator.run_job(flow.pk)
    assert outcome.succeeded, outcome.error
    back = (
        spark.read.format("jdbc")
        .options(url=url, dbtable="NAMES", driver="org.apache.derby.jdbc.EmbeddedDriver")
        .load()
    )
    assert sorted(r["name"] for r in back.collect()) == ["one", "two"]


# An in-memory Derby database is one JVM's: a cluster's executors would write to their own.
@one_jvm_only
def test_a_jdbc_export_run_again_leaves_each_row_once(team, lake, spark):
    """A retry after a later step failed, and a reprocess of the batch, export its rows
    again: the rows the earlier attempts wrote for those batches are replaced, not added
    to (nothing twice), and the plan of the reprocess names the table's batch."""
    landing = lake / "landing"
    (landing / "a.tsv").write_text("id\tname\n1\tone\n2\ttwo\n")
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    url = f"jdbc:derby:memory:bdre{id(lake)}again;create=true"
    grant_root(team.group, url, server_type="jdbc")
    driver = "org.apache.derby.jdbc.EmbeddedDriver"
    flow = build_job(
        team,
        "flow",
        [
            load_step("flow_0", "lake.names", format="tsv", upstream=[ingest]),
            StepSpec(
                "flow_1",
                EXPORT,
                properties={
                    "export": {
                        "source_table": "lake.names",
                        "format": "jdbc",
                        "jdbc_url": url,
                        "jdbc_table": "NAMES",
                        "jdbc_driver": driver,
                    }
                },
            ),
            callable_step("flow_2", "tests.processes.step_kinds.test_spark_kinds.fail_once"),
        ],
    )
    orchestrator.run_job(ingest.pk)
    FAILS.clear()
    assert not orchestrator.run_job(flow.pk).succeeded  # exported, then the last step broke
    flow.steps.update(can_recover=False)  # the re-run runs the export again
    assert orchestrator.run_job(flow.pk).succeeded

    def exported() -> list[str]:
        back = spark.read.format("jdbc").options(url=url, dbtable="NAMES", driver=driver).load()
        return sorted(r["name"] for r in back.collect())

    assert exported() == ["one", "two"]

    plan = replay.plan_reprocess_file(File.objects.get().pk)
    (rebuilt,) = plan.rebuilds
    # The database table's rows of the batches the export read, named without credentials.
    assert f"{jdbc_name(url, 'NAMES')}/batch_id={File.objects.get().batch_id}" in (
        rebuilt.partitions
    )
    assert f"lake.names/batch_id={rebuilt.target_batch_id}" in rebuilt.partitions
    replay.put_back(plan)
    assert orchestrator.run_job(flow.pk).succeeded
    assert exported() == ["one", "two"]


def test_a_query_the_lineage_parser_cannot_resolve_still_runs(team, lake, spark):
    landing = lake / "landing"
    (landing / "a.json").write_text('{"id": 1}\n{"id": 2}\n')
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    loader = build_job(
        team, "loader", [load_step("loader_0", "lake.things", format="json", upstream=[ingest])]
    )
    # A view Spark knows and BDRE never registered: the lineage parser knows no such table.
    # (Reading files by path, which this test once used, is refused: test_spark_sql_sandbox.)
    reader = build_job(
        team,
        "reader",
        [
            sql_step(
                "reader_0", "SELECT id FROM unregistered_ids", output="lake.ids", upstream=[loader]
            )
        ],
    )
    orchestrator.run_job(ingest.pk)
    assert orchestrator.run_job(loader.pk).succeeded
    spark.range(1, 3).createOrReplaceTempView("unregistered_ids")
    try:
        outcome = orchestrator.run_job(reader.pk)
    finally:
        spark.catalog.dropTempView("unregistered_ids")
    assert outcome.succeeded, outcome.error
    query = LineageQuery.objects.get(process__name="reader_0")
    assert "could not be resolved" in query.parse_error
    assert counters("reader_0")["rows_out"] == 2


@pytest.mark.django_db
def test_a_spark_sql_step_keeps_a_statement_nested_too_deeply_with_the_reason_and_runs_on():
    from processes.step_kinds.spark_sql import trace_lineage

    query = LineageQuery.objects.create(
        query_string=deeply_nested(), query_type_id=QueryKind.SPARK_SQL
    )
    # no registered tables: the schemas are not read, so no Spark session is needed
    trace_lineage(None, query, [], "lake.out")
    query.refresh_from_db()
    assert query.parse_error.startswith("the statement is nested too deeply")
    assert not query.relations.exists()
