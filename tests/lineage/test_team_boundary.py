"""Lineage shows only what the user may see (docs/security.md, "Lineage shows only what the
user may see"): two teams each have ``sales.orders``; the other team's queries touch columns
of its own ``sales.orders`` and write ``mkt.margins``. A viewer or developer of the first team
goes through every lineage endpoint and page, as he would, and never meets the other team's
columns or tables, nor an edge into them; a superuser still sees both teams' lineage."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db.models import Q

from batches.models import HiveTable
from lineage.extract import record_query
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind, QueryKind
from tests.helpers.api import api_as
from tests.helpers.factories import (
    JobFactory,
    LineageNodeFactory,
    LineageQueryFactory,
    LineageRelationFactory,
    StepFactory,
)
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db

OURS = "struct<id:int,amount:double>"
THEIRS = "struct<id:int,secret_margin:double,supplier_cost:double>"
# What only the other team's queries ever named: none of it may reach the first team.
SECRETS = ("secret_margin", "supplier_cost", "mkt.margins", "margin_kept")
OUR_SQL = "SELECT id, SUM(amount) AS total FROM sales.orders GROUP BY id"
THEIR_SQL = (
    "SELECT id, secret_margin AS margin_kept, supplier_cost FROM sales.orders"
    " WHERE secret_margin > 0"
)


def register(user, step, sql, target):
    body = {"query_string": sql, "process": step.pk, "target_table": target}
    answer = api_as(user).post("/api/v1/lineage/queries/", body, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()


@pytest.fixture
def orders(team):
    """Each team's ``sales.orders``, and one query of each team over it."""
    ours = StepFactory(parent=JobFactory(bus_domain=team.application), bus_domain=team.application)
    theirs = StepFactory(
        parent=JobFactory(bus_domain=team.other_application), bus_domain=team.other_application
    )
    HiveTable.objects.create(
        dbname="sales", table_name="orders", ddl=OURS, bus_domain=team.application
    )
    HiveTable.objects.create(
        dbname="sales", table_name="orders", ddl=THEIRS, bus_domain=team.other_application
    )
    their_query = register(team.outsider, theirs, THEIR_SQL, "mkt.margins")
    # the table, three columns, and the filter on secret_margin behind the two others
    assert their_query["parse_error"] == "" and their_query["relation_count"] == 6
    our_query = register(team.developer, ours, OUR_SQL, "sales.daily")
    # the table, two columns, and the group-by behind the total
    assert our_query["parse_error"] == "" and our_query["relation_count"] == 4
    return {"ours": ours, "theirs": theirs}


def our_node(team, name: str) -> LineageNode:
    """The node ``name`` of the first team's lineage (a query of its own touched it)."""
    ours = LineageRelation.objects.filter(query__process__bus_domain__team=team.group)
    return (
        LineageNode.objects.filter(qualified_name=name)
        .filter(Q(pk__in=ours.values("target_node")) | Q(pk__in=ours.values("src_node")))
        .get()
    )


def assert_no_secret(body: bytes | str, where: str) -> None:
    text = body.decode() if isinstance(body, bytes) else body
    for secret in SECRETS:
        assert secret not in text, f"{where} shows {secret!r} of the other team"


def test_two_teams_sales_orders_are_two_nodes_each_with_its_teams_columns(team, orders):
    tables = LineageNode.objects.filter(qualified_name="sales.orders", container_node=None)
    assert tables.count() == 2
    columns = {frozenset(t.children.values_list("display_name", flat=True)) for t in tables.all()}
    assert columns == {
        frozenset({"id", "amount"}),
        frozenset({"id", "secret_margin", "supplier_cost"}),
    }
    # no edge joins a node of one team to a node of the other
    for relation in LineageRelation.objects.select_related("src_node", "target_node"):
        assert relation.src_node.team_id == relation.target_node.team_id


@pytest.mark.parametrize("who", ["viewer", "developer"])
def test_the_node_api_lists_finds_and_details_only_the_teams_own_columns(team, orders, who):
    client = api_as(getattr(team, who))
    listed = client.get("/api/v1/lineage/nodes/", {"page_size": 500})
    assert listed.status_code == 200
    assert_no_secret(listed.content, "the node list")
    names = {n["qualified_name"] for n in listed.json()["results"]}
    assert names == {
        "sales.orders",
        "sales.orders.id",
        "sales.orders.amount",
        "sales.daily",
        "sales.daily.id",
        "sales.daily.total",
    }
    for text in ("orders", "secret", "margin", "supplier", "mkt"):
        found = client.get("/api/v1/lineage/nodes/", {"q": text})
        assert_no_secret(found.content, f"a search for {text}")
    table = our_node(team, "sales.orders")
    detail = client.get(f"/api/v1/lineage/nodes/{table.pk}/")
    assert detail.status_code == 200
    assert_no_secret(detail.content, "the node's detail")
    assert sorted(c["display_name"] for c in detail.json()["columns"]) == ["amount", "id"]
    for column in table.children.all():
        for path in ("", "upstream/", "downstream/"):
            answer = client.get(f"/api/v1/lineage/nodes/{column.pk}/{path}")
            assert answer.status_code == 200
            assert_no_secret(answer.content, f"the column's {path or 'detail'}")


def test_no_node_or_edge_of_the_other_team_is_reachable_by_id(team, orders):
    client = api_as(team.viewer)
    theirs = LineageNode.objects.filter(
        pk__in=LineageRelation.objects.filter(
            query__process__bus_domain__team=team.other_group
        ).values("src_node")
    ).exclude(pk__in=[our_node(team, "sales.orders").pk])
    assert theirs.exists()
    for node in theirs:
        for path in ("", "upstream/", "downstream/"):
            assert client.get(f"/api/v1/lineage/nodes/{node.pk}/{path}").status_code == 404
        for kind in ("table", "column"):
            graph = client.get(f"/api/v1/lineage/graph/{kind}/{node.pk}/")
            assert graph.status_code == 404
            assert_no_secret(graph.content, "a 404")
    relations = client.get("/api/v1/lineage/relations/", {"page_size": 500})
    assert_no_secret(relations.content, "the relation list")
    assert relations.json()["count"] == 4  # our own query's: the table, two columns, the group-by
    queries = client.get("/api/v1/lineage/queries/")
    assert_no_secret(queries.content, "the query list")


@pytest.mark.parametrize("fmt", ["json", "svg", "dot"])
@pytest.mark.parametrize("kind", ["table", "column"])
def test_graphs_of_a_shared_name_draw_only_the_teams_own_nodes_and_edges(team, orders, kind, fmt):
    client = api_as(team.viewer)
    for name in ("sales.orders", "sales.orders.id", "sales.daily", "sales.daily.id"):
        node = our_node(team, name)
        answer = client.get(f"/api/v1/lineage/graph/{kind}/{node.pk}/", {"format": fmt})
        assert answer.status_code == 200, (name, answer.content)
        assert_no_secret(answer.content, f"the {kind} graph of {name} as {fmt}")
        if fmt == "json":
            labels = {n["label"] for n in answer.json()["nodes"]}
            assert labels <= {
                "sales.orders",
                "sales.daily",
                "id",
                "amount",
                "total",
            }, labels


def test_the_lineage_pages_show_only_the_teams_own_columns(team, orders):
    client = client_as(team.viewer)
    for text in ("", "orders", "secret", "margin", "mkt"):
        page = client.get("/lineage/", {"q": text})
        assert page.status_code == 200
        assert_no_secret(page.content, f"the search page for {text!r}")
    for name in ("sales.orders", "sales.orders.id", "sales.daily"):
        node = our_node(team, name)
        for level in ("table", "column"):
            page = client.get(f"/lineage/nodes/{node.pk}/", {"level": level})
            assert page.status_code == 200
            assert_no_secret(page.content, f"the page of {name} at {level} level")


def test_a_query_cannot_learn_the_other_teams_columns_through_a_shared_name(team, orders):
    # mkt.margins is the other team's (its query wrote it); a query of ours writes to the
    # same name, and then reads a column only the other team's query gave it.
    register(team.developer, orders["ours"], "SELECT id FROM sales.orders", "mkt.margins")
    probe = register(
        team.developer, orders["ours"], "SELECT margin_kept FROM mkt.margins", "sales.probe"
    )
    assert probe["relation_count"] == 0
    assert probe["parse_error"]
    # the name is the team's own now (its query wrote it), the other team's column is not
    listed = api_as(team.viewer).get("/api/v1/lineage/nodes/", {"q": "margin_kept"})
    assert listed.json()["count"] == 0
    margins = our_node(team, "mkt.margins")
    detail = api_as(team.viewer).get(f"/api/v1/lineage/nodes/{margins.pk}/")
    assert [c["display_name"] for c in detail.json()["columns"]] == ["id"]


def test_the_other_team_sees_none_of_ours_either(team, orders):
    client = api_as(team.outsider)
    listed = client.get("/api/v1/lineage/nodes/", {"page_size": 500}).json()
    names = {n["qualified_name"] for n in listed["results"]}
    assert "sales.orders.amount" not in names and "sales.daily" not in names
    for node in listed["results"]:
        if node["qualified_name"] == "sales.orders":
            detail = client.get(f"/api/v1/lineage/nodes/{node['id']}/").json()
            assert "amount" not in {c["display_name"] for c in detail["columns"]}
            graph = client.get(f"/api/v1/lineage/graph/column/{node['id']}/", {"format": "dot"})
            assert b"amount" not in graph.content and b"sales.daily" not in graph.content


def test_a_superuser_sees_both_teams_lineage(team, orders, superuser):
    client = api_as(superuser)
    found = client.get("/api/v1/lineage/nodes/", {"q": "sales.orders", "kind": "table"}).json()
    assert [n["qualified_name"] for n in found["results"]] == ["sales.orders", "sales.orders"]
    columns = {
        frozenset(
            c["display_name"]
            for c in client.get(f"/api/v1/lineage/nodes/{n['id']}/").json()["columns"]
        )
        for n in found["results"]
    }
    assert columns == {
        frozenset({"id", "amount"}),
        frozenset({"id", "secret_margin", "supplier_cost"}),
    }
    everything = client.get("/api/v1/lineage/nodes/", {"q": "mkt.margins"}).json()
    assert everything["count"] == 4


def test_a_steps_query_is_recorded_on_its_teams_own_nodes(team):
    """The path a ``spark.sql`` step takes (``record_query`` with the schemas of the tables
    its team may read): each team's run of ``sales.orders`` lands on its team's node."""
    schema_ours = {"sales": {"orders": {"id": "int", "amount": "double"}}}
    schema_theirs = {"sales": {"orders": {"id": "int", "secret_margin": "double"}}}
    for application, schema in (
        (team.other_application, schema_theirs),
        (team.application, schema_ours),
    ):
        step = StepFactory(parent=JobFactory(bus_domain=application), bus_domain=application)
        query = LineageQuery.objects.create(
            query_string="SELECT * FROM sales.orders",
            query_type_id=QueryKind.SPARK_SQL,
            process=step,
        )
        assert record_query(query, schema=schema, target="sales.copy") is not None
    for group, columns in (
        (team.group, {"id", "amount"}),
        (team.other_group, {"id", "secret_margin"}),
    ):
        for name in ("sales.orders", "sales.copy"):
            node = LineageNode.objects.get(qualified_name=name, container_node=None, team=group)
            assert set(node.children.values_list("display_name", flat=True)) == columns


def test_an_edge_between_two_teams_nodes_is_never_followed(team):
    """Such an edge is not recorded any more; one left by older data (or by an application
    moved to another team) leads nowhere: the other team's node is dropped, not drawn."""
    ours = LineageNodeFactory(qualified_name="sales.daily", team=team.group)
    theirs = LineageNodeFactory(qualified_name="mkt.margins", team=team.other_group)
    step = StepFactory(parent=JobFactory(bus_domain=team.application), bus_domain=team.application)
    LineageRelationFactory(
        src_node=ours, target_node=theirs, query=LineageQueryFactory(process=step)
    )
    client = api_as(team.viewer)
    assert client.get("/api/v1/lineage/relations/").json()["count"] == 0
    assert client.get(f"/api/v1/lineage/nodes/{ours.pk}/downstream/").json() == []
    for fmt in ("json", "svg", "dot"):
        graph = client.get(f"/api/v1/lineage/graph/table/{ours.pk}/", {"format": fmt})
        assert graph.status_code == 200
        assert_no_secret(graph.content, f"the table graph as {fmt}")
    assert_no_secret(client_as(team.viewer).get(f"/lineage/nodes/{ours.pk}/").content, "the page")
    assert client.get(f"/api/v1/lineage/nodes/{theirs.pk}/").status_code == 404


def test_the_migration_gives_each_team_its_own_copy_of_a_node_they_shared(team):
    """Nodes recorded before nodes had a team: one ``sales.orders`` that both teams' queries
    touched, with the columns of both."""
    steps = {
        group: StepFactory(parent=JobFactory(bus_domain=app), bus_domain=app)
        for group, app in (
            (team.other_group, team.other_application),
            (team.group, team.application),
        )
    }

    def node(name, container=None):
        kind = NodeKind.COLUMN if container else NodeKind.TABLE
        return LineageNodeFactory(
            qualified_name=name, container_node=container, node_type_id=kind, team=None
        )

    orders, margins, daily = node("sales.orders"), node("mkt.margins"), node("sales.daily")
    column = {
        name: node(name, table)
        for name, table in (
            ("sales.orders.id", orders),
            ("sales.orders.secret_margin", orders),
            ("sales.orders.amount", orders),
            ("sales.orders.konst", orders),  # no edge names it: nobody's
            ("mkt.margins.id", margins),
            ("mkt.margins.margin_kept", margins),
            ("sales.daily.id", daily),
            ("sales.daily.total", daily),
        )
    }
    edges = {
        team.other_group: [
            (orders, margins),
            (column["sales.orders.id"], column["mkt.margins.id"]),
            (column["sales.orders.secret_margin"], column["mkt.margins.margin_kept"]),
        ],
        team.group: [
            (orders, daily),
            (column["sales.orders.id"], column["sales.daily.id"]),
            (column["sales.orders.amount"], column["sales.daily.total"]),
        ],
    }
    for group, pairs in edges.items():  # the other team's first: its edges are the oldest
        query = LineageQueryFactory(process=steps[group])
        for src, dst in pairs:
            LineageRelationFactory(src_node=src, target_node=dst, query=query)
    migration = importlib.import_module("lineage.migrations.0005_split_nodes_per_team")
    migration.split_per_team(apps, None)

    tables = LineageNode.objects.filter(container_node=None)
    assert sorted((t.qualified_name, t.team_id) for t in tables) == sorted(
        [
            ("sales.orders", team.other_group.pk),
            ("sales.orders", team.group.pk),
            ("mkt.margins", team.other_group.pk),
            ("sales.daily", team.group.pk),
        ]
    )
    for table in tables:
        assert set(table.children.values_list("team", flat=True)) == {table.team_id}
    children = {
        t.team_id: set(t.children.values_list("qualified_name", flat=True))
        for t in tables.filter(qualified_name="sales.orders")
    }
    assert children == {
        team.other_group.pk: {"sales.orders.id", "sales.orders.secret_margin"},
        team.group.pk: {"sales.orders.id", "sales.orders.amount"},
    }
    for relation in LineageRelation.objects.select_related("src_node", "target_node"):
        owner = relation.query.process.bus_domain.team_id
        assert relation.src_node.team_id == relation.target_node.team_id == owner
    assert LineageRelation.objects.count() == 6
    detail = api_as(team.viewer).get(
        f"/api/v1/lineage/nodes/{tables.get(qualified_name='sales.orders', team=team.group).pk}/"
    )
    assert_no_secret(detail.content, "the migrated node's detail")
