"""Table-level and column-level lineage graphs, and a column's impact list."""

from __future__ import annotations

import pytest

from lineage import graphs
from lineage.extract import extract, record
from lineage.models import LineageNode, LineageRelation
from tests.helpers.factories import LineageQueryFactory
from tests.helpers.graphs import edge_names, labels

SCHEMA = {
    "lake": {
        "orders": {"id": "int", "customer_id": "int", "amount": "double"},
        "customers": {"id": "int", "country": "string"},
        "daily": {"country": "string", "total": "double"},
    }
}

pytestmark = pytest.mark.django_db


def direct(graph) -> set[tuple[str, str, str]]:
    """The edges of the values (drawn solid), not of the rows."""
    return edge_names(graph, indirect=False)


@pytest.fixture
def chain():
    """lake.orders + lake.customers -> lake.daily -> lake.report, by two queries."""
    first = LineageQueryFactory()
    record(
        first,
        extract(
            """SELECT c.country, SUM(o.amount) AS total FROM lake.orders o
               JOIN lake.customers c ON o.customer_id = c.id GROUP BY c.country""",
            schema=SCHEMA,
            target="lake.daily",
        ),
    )
    second = LineageQueryFactory(process=first.process)
    record(
        second,
        extract(
            "SELECT UPPER(country) AS country, ROUND(total, 2) AS total FROM lake.daily",
            schema=SCHEMA,
            target="lake.report",
        ),
    )
    return {n.qualified_name: n for n in LineageNode.objects.all()}


def test_the_table_graph_reaches_tables_upstream_and_downstream(chain):
    graph = graphs.table_graph(chain["lake.daily"], LineageRelation.objects.all())
    assert labels(graph) == {"lake.orders", "lake.customers", "lake.daily", "lake.report"}
    assert edge_names(graph) == {
        ("lake.orders", "lake.daily", ""),
        ("lake.customers", "lake.daily", ""),
        ("lake.daily", "lake.report", ""),
    }
    assert [n.label for n in graph.nodes.values() if n.focus] == ["lake.daily"]


def test_a_column_graph_follows_the_column_through_its_functions(chain):
    graph = graphs.column_graph(chain["lake.report.total"], LineageRelation.objects.all())
    assert direct(graph) == {
        ("lake.orders.amount", "lake.daily.total", "SUM"),
        ("lake.daily.total", "lake.report.total", "ROUND"),
    }


def test_a_column_graph_shows_the_join_and_group_by_behind_an_aggregate_as_indirect(chain):
    # total sums amount; which rows, and into which groups, the join and the group-by say
    graph = graphs.column_graph(chain["lake.daily.total"], LineageRelation.objects.all())
    assert edge_names(graph, indirect=True) == {
        ("lake.orders.customer_id", "lake.daily.total", "join"),
        ("lake.customers.id", "lake.daily.total", "join"),
        ("lake.customers.country", "lake.daily.total", "group by"),
    }
    svg = graphs.to_svg(graph)
    assert svg.count('stroke-dasharray="5 4"') == 3  # drawn dashed
    assert "country → total: group by (indirect)" in svg


def test_a_table_column_graph_shows_its_columns_with_their_direct_neighbours(chain):
    graph = graphs.column_graph(chain["lake.daily"], LineageRelation.objects.all())
    assert direct(graph) == {
        ("lake.customers.country", "lake.daily.country", ""),
        ("lake.orders.amount", "lake.daily.total", "SUM"),
        ("lake.daily.country", "lake.report.country", "UPPER"),
        ("lake.daily.total", "lake.report.total", "ROUND"),
    }
    assert {n.label for n in graph.nodes.values() if n.focus} == {"country", "total"}


def test_downstream_impact_lists_every_column_a_column_flows_into_nearest_first(chain):
    found = graphs.impact(
        chain["lake.orders.amount"], LineageRelation.objects.all(), upstream=False
    )
    assert [(i.qualified_name, i.distance, i.functions) for i in found] == [
        ("lake.daily.total", 1, ["SUM"]),
        ("lake.report.total", 2, ["ROUND"]),
    ]


def test_upstream_impact_of_a_column_reaches_the_source_columns(chain):
    found = graphs.impact(
        chain["lake.report.country"], LineageRelation.objects.all(), upstream=True
    )
    assert [(i.qualified_name, i.distance) for i in found] == [
        ("lake.daily.country", 1),
        ("lake.customers.country", 2),
        # the join deciding which countries there are: indirect, as far
        ("lake.customers.id", 2),
        ("lake.orders.customer_id", 2),
    ]


def test_relations_out_of_scope_are_not_followed(chain):
    graph = graphs.table_graph(chain["lake.daily"], LineageRelation.objects.none())
    assert labels(graph) == {"lake.daily"}
    assert graph.edges == []
