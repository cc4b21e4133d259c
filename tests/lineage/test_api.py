"""The lineage API: registering queries, nodes and their impact, relations, and graphs as
JSON, SVG and DOT, each scoped to the user's teams."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from batches.models import HiveTable
from lineage.models import LineageNode, LineageQuery
from tests.helpers.api import api_as
from tests.helpers.factories import BatchFactory, FileFactory, JobFactory, StepFactory

# backends: the lists' filters and searches: queries (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]

ORDERS = "struct<id:int,customer_id:int,amount:double,tags:map<string,array<string>>>"


@pytest.fixture
def setup(team):
    job = JobFactory(bus_domain=team.application, name="daily_job")
    step = StepFactory(parent=job, bus_domain=team.application, name="daily_sql")
    job.next_processes.add(step)
    HiveTable.objects.create(
        dbname="lake", table_name="orders", ddl=ORDERS, bus_domain=team.application
    )
    other_step = StepFactory(
        parent=JobFactory(bus_domain=team.other_application), bus_domain=team.other_application
    )
    return {"job": job, "step": step, "other_step": other_step}


def register(user, step, sql, **extra):
    body = {"query_string": sql, "process": step.pk, **extra}
    return api_as(user).post("/api/v1/lineage/queries/", body, format="json")


SQL = "SELECT customer_id, SUM(amount) AS total FROM lake.orders GROUP BY customer_id"


def test_a_developer_registers_a_query_and_gets_its_lineage(team, setup):
    answer = register(team.developer, setup["step"], SQL, target_table="lake.totals")
    assert answer.status_code == 201, answer.content
    assert answer.json()["parse_error"] == ""
    # one table edge, two column edges, and the group-by behind the total
    assert answer.json()["relation_count"] == 4
    relations = api_as(team.viewer).get(f"/api/v1/lineage/queries/{answer.json()['id']}/relations/")
    assert {
        (r["source"], r["target"], tuple(r["functions"]), tuple(r["indirect"]))
        for r in relations.json()
    } == {
        ("lake.orders", "lake.totals", (), ()),
        ("lake.orders.customer_id", "lake.totals.customer_id", (), ()),
        ("lake.orders.amount", "lake.totals.total", ("SUM",), ()),
        ("lake.orders.customer_id", "lake.totals.total", (), ("group by",)),
    }


def test_an_insert_names_its_own_target_and_hive_is_read(team, setup):
    sql = "INSERT INTO TABLE lake.copy (id, amount) SELECT id, amount FROM lake.orders"
    answer = register(team.developer, setup["step"], sql, dialect="hive")
    assert answer.status_code == 201
    assert answer.json()["dialect"] == "hive"
    assert LineageNode.objects.filter(qualified_name="lake.copy.amount").exists()


def relations_of(user, answer) -> set[tuple[str, str]]:
    rows = api_as(user).get(f"/api/v1/lineage/queries/{answer.json()['id']}/relations/")
    return {(r["source"], r["target"]) for r in rows.json()}


def test_insert_with_a_column_list_maps_by_the_list_not_the_aliases(team, setup):
    sql = """INSERT INTO lake.pairs (a, b)
             SELECT id AS b, amount AS a FROM lake.orders"""
    answer = register(team.developer, setup["step"], sql)
    assert answer.status_code == 201 and answer.json()["parse_error"] == ""
    assert relations_of(team.viewer, answer) == {
        ("lake.orders", "lake.pairs"),
        ("lake.orders.id", "lake.pairs.a"),
        ("lake.orders.amount", "lake.pairs.b"),
    }


def test_insert_without_a_column_list_fills_a_registered_tables_columns_by_position(team, setup):
    HiveTable.objects.create(
        dbname="lake",
        table_name="pairs",
        ddl="struct<a:int,b:double>",
        bus_domain=team.application,
    )
    sql = "INSERT INTO lake.pairs SELECT id AS b, amount AS a FROM lake.orders"
    answer = register(team.developer, setup["step"], sql)
    assert answer.json()["parse_error"] == ""
    assert relations_of(team.viewer, answer) == {
        ("lake.orders", "lake.pairs"),
        ("lake.orders.id", "lake.pairs.a"),
        ("lake.orders.amount", "lake.pairs.b"),
    }


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM lake.unknown",
        "SELECT o.id, u.name FROM lake.orders o JOIN lake.unknown u ON o.id = u.id",
    ],
)
def test_a_query_over_an_unregistered_table_is_kept_with_the_reason_and_no_edges(team, setup, sql):
    answer = register(team.developer, setup["step"], sql, target_table="lake.out")
    assert answer.status_code == 201
    assert answer.json()["parse_error"].startswith("table lake.unknown is not registered")
    assert answer.json()["relation_count"] == 0
    assert not LineageNode.objects.filter(qualified_name__startswith="lake.unknown").exists()
    assert not LineageNode.objects.filter(qualified_name__startswith="lake.out").exists()


def test_another_teams_table_is_not_registered_for_this_query(team, setup):
    HiveTable.objects.create(
        dbname="their", table_name="secret", ddl="struct<x:int>", bus_domain=team.other_application
    )
    answer = register(
        team.developer, setup["step"], "SELECT x FROM their.secret", target_table="lake.out"
    )
    assert answer.json()["parse_error"].startswith("table their.secret is not registered")


def test_a_table_known_only_from_earlier_queries_is_not_guessed_at(team, setup):
    # lake.totals is not registered: lineage knows the two columns a query wrote, no more
    register(team.developer, setup["step"], SQL, target_table="lake.totals")
    star = register(
        team.developer, setup["step"], "SELECT * FROM lake.totals", target_table="lake.copy"
    )
    assert star.json()["parse_error"].startswith("table lake.totals is not registered")
    assert star.json()["relation_count"] == 0
    insert = register(
        team.developer, setup["step"], "INSERT INTO lake.totals SELECT id, amount FROM lake.orders"
    )
    assert "table lake.totals is not registered: an INSERT" in insert.json()["parse_error"]
    named = register(
        team.developer, setup["step"], "SELECT total FROM lake.totals", target_table="lake.copy"
    )
    assert relations_of(team.viewer, named) == {
        ("lake.totals", "lake.copy"),
        ("lake.totals.total", "lake.copy.total"),
    }


def test_a_statement_nested_too_deeply_is_a_400_saying_what_to_fix(team, setup):
    sql = "SELECT " + "(" * 150 + "amount" + ")" * 150 + " AS a FROM lake.orders"
    answer = register(team.developer, setup["step"], sql, target_table="lake.out")
    assert answer.status_code == 400
    message = answer.json()["query_string"][0]
    assert "nested too deeply" in message and "WITH" in message
    assert not LineageQuery.objects.exists()


def test_fifty_nested_parentheses_are_a_400_with_the_message_of_every_entry_point(team, setup):
    from bdre.sql_parse import TOO_DEEP

    sql = "SELECT " + "(" * 50 + "1" + ")" * 50
    answer = register(team.developer, setup["step"], sql, target_table="lake.out")
    assert answer.status_code == 400
    # The same words as the properties API, the pages and the import answer with
    # (tests/processes/test_nested_sql.py).
    assert answer.json()["query_string"] == [TOO_DEEP]
    assert not LineageQuery.objects.exists()


def test_a_query_that_cannot_be_read_is_kept_with_the_reason(team, setup):
    answer = register(
        team.developer, setup["step"], "SELECT nope FROM lake.orders", target_table="x.y"
    )
    assert answer.status_code == 201
    assert "nope" in answer.json()["parse_error"]
    assert LineageQuery.objects.get(pk=answer.json()["id"]).relations.count() == 0


@pytest.mark.parametrize(
    "body, field",
    [
        ({"query_string": "  "}, "query_string"),
        ({"dialect": "pig"}, "dialect"),
        ({"target_table": "a b; drop"}, "target_table"),
        ({"process": 10**17}, "process"),
    ],
)
def test_bad_input_is_answered_on_the_field(team, setup, body, field):
    answer = register(team.developer, setup["step"], SQL, **body)
    assert answer.status_code == 400
    assert field in answer.json()


def test_a_viewer_may_not_register_and_an_outsider_cannot_name_another_teams_process(team, setup):
    assert register(team.viewer, setup["step"], SQL, target_table="lake.t").status_code == 403
    answer = register(team.outsider, setup["step"], SQL, target_table="lake.t")
    assert answer.status_code == 400 and "process" in answer.json()


def test_nodes_are_searched_and_scoped_to_the_teams_queries(team, setup):
    register(team.developer, setup["step"], SQL, target_table="lake.totals")
    found = api_as(team.viewer).get("/api/v1/lineage/nodes/", {"q": "totals", "kind": "table"})
    assert [n["qualified_name"] for n in found.json()["results"]] == ["lake.totals"]
    detail = api_as(team.viewer).get(f"/api/v1/lineage/nodes/{found.json()['results'][0]['id']}/")
    assert [c["display_name"] for c in detail.json()["columns"]] == ["customer_id", "total"]
    assert api_as(team.outsider).get("/api/v1/lineage/nodes/").json()["count"] == 0
    node = found.json()["results"][0]["id"]
    assert api_as(team.outsider).get(f"/api/v1/lineage/nodes/{node}/").status_code == 404


def test_the_impact_of_a_column_upstream_and_downstream(team, setup):
    register(team.developer, setup["step"], SQL, target_table="lake.totals")
    register(
        team.developer,
        setup["step"],
        "SELECT ROUND(total) AS t FROM lake.totals",
        target_table="lake.report",
    )
    amount = LineageNode.objects.get(qualified_name="lake.orders.amount")
    client = api_as(team.viewer)
    down = client.get(f"/api/v1/lineage/nodes/{amount.pk}/downstream/").json()
    assert [(r["qualified_name"], r["distance"], r["functions"]) for r in down] == [
        ("lake.totals.total", 1, ["SUM"]),
        ("lake.report.t", 2, ["ROUND"]),
    ]
    report = LineageNode.objects.get(qualified_name="lake.report.t")
    up = client.get(f"/api/v1/lineage/nodes/{report.pk}/upstream/", {"depth": 1}).json()
    assert [r["qualified_name"] for r in up] == ["lake.totals.total"]
    bad = client.get(f"/api/v1/lineage/nodes/{report.pk}/upstream/", {"depth": "0"})
    assert bad.status_code == 400 and "depth" in bad.json()
    assert (
        api_as(team.outsider).get(f"/api/v1/lineage/nodes/{amount.pk}/downstream/").status_code
        == 404
    )


def test_relations_list_filters_by_node(team, setup):
    register(team.developer, setup["step"], SQL, target_table="lake.totals")
    amount = LineageNode.objects.get(qualified_name="lake.orders.amount")
    rows = api_as(team.viewer).get("/api/v1/lineage/relations/", {"node": amount.pk}).json()
    assert [(r["source"], r["target"]) for r in rows["results"]] == [
        ("lake.orders.amount", "lake.totals.total")
    ]
    assert api_as(team.outsider).get("/api/v1/lineage/relations/").json()["count"] == 0


def test_graphs_come_as_json_svg_and_dot(team, setup):
    register(team.developer, setup["step"], SQL, target_table="lake.totals")
    table = LineageNode.objects.get(qualified_name="lake.totals")
    client = api_as(team.viewer)
    url = f"/api/v1/lineage/graph/table/{table.pk}/"
    as_json = client.get(url)
    assert as_json.status_code == 200
    assert {n["label"] for n in as_json.json()["nodes"]} == {"lake.orders", "lake.totals"}
    svg = client.get(url, {"format": "svg"})
    assert svg["Content-Type"].startswith("image/svg+xml")
    assert ET.fromstring(svg.content).tag.endswith("svg")
    dot = client.get(url, HTTP_ACCEPT="text/vnd.graphviz")
    assert dot["Content-Type"].startswith("text/vnd.graphviz")
    assert dot.content.decode().startswith("digraph")
    column = client.get(f"/api/v1/lineage/graph/column/{table.pk}/").json()
    assert {(e["label"], e["indirect"]) for e in column["edges"]} == {
        ("", False),
        ("SUM", False),
        ("group by", True),
    }
    dot = client.get(f"/api/v1/lineage/graph/column/{table.pk}/", HTTP_ACCEPT="text/vnd.graphviz")
    assert '[label="group by", style=dashed]' in dot.content.decode()


def test_process_and_batch_graphs(team, setup):
    client = api_as(team.viewer)
    workflow = client.get(f"/api/v1/lineage/graph/process/{setup['step'].pk}/").json()
    assert workflow["title"] == "Workflow of daily_job"
    assert [n["label"] for n in workflow["nodes"]] == ["daily_sql"]
    batch = BatchFactory(bus_domain=team.application)
    FileFactory(batch=batch, path="/landing/a.tsv")
    drawn = client.get(f"/api/v1/lineage/graph/batch/{batch.pk}/", {"format": "svg"})
    assert drawn.status_code == 200 and b"a.tsv" in drawn.content


def test_graphs_of_other_teams_and_unknown_ids_are_json_404s(team, setup):
    client = api_as(team.outsider)
    for url in (
        f"/api/v1/lineage/graph/process/{setup['step'].pk}/",
        f"/api/v1/lineage/graph/batch/{BatchFactory(bus_domain=team.application).pk}/",
        "/api/v1/lineage/graph/table/999999/",
    ):
        answer = client.get(url, {"format": "svg"})
        assert answer.status_code == 404, url
        assert answer["Content-Type"] == "application/json"
    assert client.get("/api/v1/lineage/graph/galaxy/1/").status_code == 404
    assert (
        api_as(team.viewer).get("/api/v1/lineage/graph/table/1/", {"format": "png"}).status_code
        == 404
    )
