"""Column lineage of real queries, with the exact edges expected; storing reuses nodes."""

from __future__ import annotations

import pytest

from lineage.extract import ColumnEdge, LineageError, extract, record, record_query
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind, QueryKind

SCHEMA = {
    "lake": {
        "orders": {"id": "int", "customer_id": "int", "amount": "double", "ts": "timestamp"},
        "customers": {"id": "int", "name": "string", "country": "string"},
        "refunds": {"order_id": "int", "amount": "double"},
    }
}


def edges(sql: str, target: str | None = "lake.out") -> set[tuple[str, str, tuple[str, ...]]]:
    result = extract(sql, schema=SCHEMA, target=target)
    return {(e.source, e.target, e.functions) for e in result.edges}


def test_a_join_with_aliases():
    sql = """SELECT o.id AS order_id, c.name AS customer, o.amount
             FROM lake.orders o JOIN lake.customers AS c ON o.customer_id = c.id"""
    assert edges(sql) == {
        ("lake.orders.id", "lake.out.order_id", ()),
        ("lake.customers.name", "lake.out.customer", ()),
        ("lake.orders.amount", "lake.out.amount", ()),
    }


def test_a_cte_passes_the_lineage_and_the_functions_through():
    sql = """WITH big AS (SELECT customer_id, ROUND(amount, 1) AS amt FROM lake.orders
                          WHERE amount > 10)
             SELECT b.customer_id, b.amt * 2 AS double_amt FROM big b"""
    assert edges(sql) == {
        ("lake.orders.customer_id", "lake.out.customer_id", ()),
        ("lake.orders.amount", "lake.out.double_amt", ("ROUND",)),
    }


def test_select_star_is_expanded_from_the_schema():
    result = extract("SELECT * FROM lake.customers", schema=SCHEMA, target="lake.out")
    assert result.columns == ["id", "name", "country"]
    assert [(e.source, e.target) for e in result.edges] == [
        ("lake.customers.country", "lake.out.country"),
        ("lake.customers.id", "lake.out.id"),
        ("lake.customers.name", "lake.out.name"),
    ]


def test_a_case_reads_every_column_it_tests_and_returns():
    sql = """SELECT CASE WHEN country = 'FR' THEN name ELSE 'other' END AS label
             FROM lake.customers"""
    assert edges(sql) == {
        ("lake.customers.country", "lake.out.label", ("CASE",)),
        ("lake.customers.name", "lake.out.label", ("CASE",)),
    }


def test_aggregates_with_group_by():
    sql = """SELECT c.country, SUM(o.amount) AS revenue, COUNT(DISTINCT o.customer_id) AS buyers
             FROM lake.orders o JOIN lake.customers c ON o.customer_id = c.id
             GROUP BY c.country"""
    assert edges(sql) == {
        ("lake.customers.country", "lake.out.country", ()),
        ("lake.orders.amount", "lake.out.revenue", ("SUM",)),
        ("lake.orders.customer_id", "lake.out.buyers", ("COUNT",)),
    }


def test_a_window_function_depends_on_its_partition_and_order():
    sql = """SELECT id, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ts DESC) AS rn
             FROM lake.orders"""
    assert edges(sql) == {
        ("lake.orders.id", "lake.out.id", ()),
        ("lake.orders.customer_id", "lake.out.rn", ("ROW_NUMBER",)),
        ("lake.orders.ts", "lake.out.rn", ("ROW_NUMBER",)),
    }


def test_insert_overwrite_partition_names_its_own_target():
    sql = """INSERT OVERWRITE TABLE lake.daily PARTITION (batch_id = 7)
             SELECT to_date(ts) AS day, amount FROM lake.orders"""
    result = extract(sql, schema=SCHEMA)
    assert result.target == "lake.daily"
    assert {(e.source, e.target, e.functions) for e in result.edges} == {
        ("lake.orders.ts", "lake.daily.day", ("TO_DATE",)),
        ("lake.orders.amount", "lake.daily.amount", ()),
    }


def test_a_union_takes_both_branches():
    sql = """SELECT id AS order_id, amount FROM lake.orders
             UNION ALL
             SELECT order_id, -amount FROM lake.refunds"""
    assert edges(sql) == {
        ("lake.orders.id", "lake.out.order_id", ()),
        ("lake.refunds.order_id", "lake.out.order_id", ()),
        ("lake.orders.amount", "lake.out.amount", ()),
        ("lake.refunds.amount", "lake.out.amount", ()),
    }


def test_a_subquery_in_from():
    sql = """SELECT t.total FROM (SELECT customer_id, SUM(amount) AS total FROM lake.orders
             GROUP BY customer_id) AS t"""
    assert edges(sql) == {("lake.orders.amount", "lake.out.total", ("SUM",))}


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT FROM WHERE", "cannot parse"),
        ("SELECT nope FROM lake.orders", "could not be resolved"),
        ("DROP TABLE lake.orders", "carry no lineage"),
        ("SELECT 1; SELECT 2", "one statement"),
    ],
)
def test_what_cannot_be_read_says_why(sql, reason):
    with pytest.raises(LineageError, match=reason):
        extract(sql, schema=SCHEMA, target="lake.out")


@pytest.mark.django_db
def test_nodes_are_shared_by_every_query_and_run():
    sql = "SELECT id, amount FROM lake.orders"
    for _ in range(2):
        query = LineageQuery.objects.create(query_string=sql, query_type_id=QueryKind.SPARK_SQL)
        record(query, extract(sql, schema=SCHEMA, target="lake.out"))
    assert LineageNode.objects.filter(node_type=NodeKind.TABLE).count() == 2
    assert LineageNode.objects.filter(node_type=NodeKind.COLUMN).count() == 4
    assert LineageRelation.objects.count() == 2 * 3  # a table edge and two column edges each
    column = LineageNode.objects.get(qualified_name="lake.out.amount")
    assert column.container_node.qualified_name == "lake.out"
    assert column.display_name == "amount"


@pytest.mark.django_db
def test_functions_label_the_column_edge():
    query = LineageQuery.objects.create(
        query_string="SELECT SUM(amount) AS total FROM lake.orders",
        query_type_id=QueryKind.HIVE,
    )
    assert record_query(query, schema=SCHEMA, target="lake.out") is not None
    relation = LineageRelation.objects.get(target_node__qualified_name="lake.out.total")
    assert relation.dot_string == '[label="SUM"]'


@pytest.mark.django_db
def test_a_query_that_cannot_be_parsed_is_kept_with_the_reason():
    query = LineageQuery.objects.create(
        query_string="SELECT FROM WHERE", query_type_id=QueryKind.SPARK_SQL
    )
    assert record_query(query, schema=SCHEMA, target="lake.out") is None
    query.refresh_from_db()
    assert query.parse_error.startswith("cannot parse")
    assert "\x1b" not in query.parse_error
    assert not query.relations.exists()


def test_edges_sort_and_compare_as_values():
    assert ColumnEdge("a.b.c", "d.e.f") < ColumnEdge("a.b.d", "d.e.f")
