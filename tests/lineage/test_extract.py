"""Column lineage of real queries, with the exact edges expected; storing reuses nodes."""

from __future__ import annotations

import pytest

from lineage.extract import (
    ColumnEdge,
    LineageError,
    StatementTooDeep,
    extract,
    record,
    record_query,
)
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind, QueryKind
from tests.helpers.lineage import deeply_nested

SCHEMA = {
    "lake": {
        "orders": {"id": "int", "customer_id": "int", "amount": "double", "ts": "timestamp"},
        "customers": {"id": "int", "name": "string", "country": "string"},
        "refunds": {"order_id": "int", "amount": "double"},
        # partitioned by batch_id, which Spark lists last
        "daily": {"day": "date", "amount": "double", "batch_id": "bigint"},
    }
}


def edges(sql: str, target: str | None = "lake.out") -> set[tuple[str, str, tuple[str, ...]]]:
    result = extract(sql, schema=SCHEMA, target=target)
    return {(e.source, e.target, e.functions) for e in result.edges if not e.indirect}


def indirect(sql: str, target: str = "lake.out") -> set[tuple[str, str, tuple[str, ...]]]:
    """The indirect edges: a source deciding the target's rows, with how."""
    result = extract(sql, schema=SCHEMA, target=target)
    return {(e.source, e.target, e.indirect) for e in result.edges if e.indirect}


def test_a_join_with_aliases():
    sql = """SELECT o.id AS order_id, c.name AS customer, o.amount
             FROM lake.orders o JOIN lake.customers AS c ON o.customer_id = c.id"""
    assert edges(sql) == {
        ("lake.orders.id", "lake.out.order_id", ()),
        ("lake.customers.name", "lake.out.customer", ()),
        ("lake.orders.amount", "lake.out.amount", ()),
    }


def test_filters_join_keys_and_group_bys_are_indirect_dependencies_of_every_output():
    # The demo's daily summary: page_views counts rows; which rows is the filter's and the
    # group-by's, so it depends on both without taking a value from either.
    sql = """SELECT to_date(o.ts) AS day, count(*) AS orders FROM lake.orders o
             JOIN lake.customers c ON o.customer_id = c.id
             WHERE c.country = 'NO' GROUP BY to_date(o.ts)"""
    assert edges(sql) == {("lake.orders.ts", "lake.out.day", ("TO_DATE",))}
    assert indirect(sql) == {
        ("lake.orders.ts", "lake.out.orders", ("group by",)),
        *{
            (source, f"lake.out.{target}", (how,))
            for source, how in [
                ("lake.customers.country", "filter"),
                ("lake.customers.id", "join"),
                ("lake.orders.customer_id", "join"),
            ]
            for target in ("day", "orders")
        },
    }


def test_an_indirect_dependency_inside_a_cte_is_traced_to_its_table():
    sql = """WITH big AS (SELECT customer_id AS who, amount FROM lake.orders WHERE amount > 10)
             SELECT c.name, sum(b.amount) AS total FROM big b JOIN lake.customers c
             ON c.id = b.who GROUP BY c.name HAVING sum(b.amount) > 100"""
    found = indirect(sql)
    assert ("lake.orders.customer_id", "lake.out.total", ("join",)) in found
    assert ("lake.customers.name", "lake.out.total", ("group by",)) in found
    # amount: the CTE's filter and the HAVING, and the value of total (direct, so not here)
    assert ("lake.orders.amount", "lake.out.name", ("filter",)) in found
    assert not any(t == "lake.out.total" and s == "lake.orders.amount" for s, t, _ in found)
    # the name is total's group-by and name's own value: direct wins for name
    assert not any(t == "lake.out.name" and s == "lake.customers.name" for s, t, _ in found)


def test_a_scalar_subquerys_filter_chooses_its_own_value_not_the_statements_rows():
    sql = """SELECT o.id, (SELECT max(r.amount) FROM lake.refunds r WHERE r.order_id = 1) AS m
             FROM lake.orders o WHERE o.amount > 0"""
    found = indirect(sql)
    assert ("lake.orders.amount", "lake.out.id", ("filter",)) in found
    assert not any(s == "lake.refunds.order_id" for s, _, _ in found)


def test_a_correlated_subquery_filters_by_its_own_column_and_the_outer_one():
    sql = """SELECT o.amount FROM lake.orders o
             WHERE EXISTS (SELECT 1 FROM lake.refunds r WHERE r.order_id = o.id)"""
    assert indirect(sql) == {
        ("lake.refunds.order_id", "lake.out.amount", ("filter",)),
        ("lake.orders.id", "lake.out.amount", ("filter",)),
    }


def test_what_a_subquery_in_a_filter_selects_filters_the_outer_rows():
    sql = """SELECT o.amount FROM lake.orders o
             WHERE o.customer_id IN (SELECT c.id FROM lake.customers c WHERE c.country = 'NL')"""
    assert indirect(sql) == {
        ("lake.orders.customer_id", "lake.out.amount", ("filter",)),
        ("lake.customers.id", "lake.out.amount", ("filter",)),
        ("lake.customers.country", "lake.out.amount", ("filter",)),
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
    # by position onto lake.daily's columns, but for the partition given a value
    sql = """INSERT OVERWRITE TABLE lake.daily PARTITION (batch_id = 7)
             SELECT to_date(ts) AS d, amount AS a FROM lake.orders"""
    result = extract(sql, schema=SCHEMA)
    assert result.target == "lake.daily"
    assert {(e.source, e.target, e.functions) for e in result.edges} == {
        ("lake.orders.ts", "lake.daily.day", ("TO_DATE",)),
        ("lake.orders.amount", "lake.daily.amount", ()),
    }


def test_insert_with_a_column_list_maps_by_the_list_not_the_aliases():
    sql = """INSERT INTO lake.daily (amount, day)
             SELECT to_date(ts) AS amount, amount AS day FROM lake.orders"""
    result = extract(sql, schema=SCHEMA)
    assert result.columns == ["amount", "day"]
    assert {(e.source, e.target, e.functions) for e in result.edges} == {
        ("lake.orders.ts", "lake.daily.amount", ("TO_DATE",)),
        ("lake.orders.amount", "lake.daily.day", ()),
    }


def test_insert_without_a_column_list_fills_the_targets_columns_by_position():
    sql = """INSERT INTO lake.daily
             SELECT to_date(ts) AS amount, amount AS day, 7 AS b FROM lake.orders"""
    result = extract(sql, schema=SCHEMA)
    assert result.columns == ["day", "amount", "batch_id"]
    assert {(e.source, e.target) for e in result.edges} == {
        ("lake.orders.ts", "lake.daily.day"),
        ("lake.orders.amount", "lake.daily.amount"),
    }


def test_two_outputs_with_one_name_each_fill_their_own_column_by_position():
    sql = "INSERT INTO lake.customers SELECT id, amount AS x, ts AS x FROM lake.orders"
    assert {(e.source, e.target) for e in extract(sql, schema=SCHEMA).edges} == {
        ("lake.orders.id", "lake.customers.id"),
        ("lake.orders.amount", "lake.customers.name"),
        ("lake.orders.ts", "lake.customers.country"),
    }


def test_a_dynamic_partition_is_filled_by_the_last_output():
    sql = """INSERT OVERWRITE TABLE lake.daily PARTITION (batch_id)
             SELECT id, to_date(ts), amount FROM lake.orders"""
    assert {(e.source, e.target) for e in extract(sql, schema=SCHEMA).edges} == {
        ("lake.orders.id", "lake.daily.day"),
        ("lake.orders.ts", "lake.daily.amount"),
        ("lake.orders.amount", "lake.daily.batch_id"),
    }


def test_a_with_before_the_insert_is_read():
    sql = """WITH big AS (SELECT amount FROM lake.orders WHERE amount > 10)
             INSERT INTO lake.refunds (amount, order_id) SELECT amount, 1 FROM big"""
    assert edges(sql, None) == {("lake.orders.amount", "lake.refunds.amount", ())}


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (
            "INSERT INTO lake.copy SELECT id, amount FROM lake.orders",
            "table lake.copy is not registered: an INSERT without a column list",
        ),
        (
            "INSERT INTO lake.daily SELECT ts, amount FROM lake.orders",
            r"the SELECT gives 2 columns and lake.daily takes 3 \(day, amount, batch_id\)",
        ),
        (
            "INSERT INTO lake.daily (day) SELECT ts, amount FROM lake.orders",
            r"the SELECT gives 2 columns and lake.daily takes 1 \(day\)",
        ),
        (
            "INSERT INTO lake.daily (day, nope) SELECT ts, amount FROM lake.orders",
            "lake.daily has no column nope",
        ),
    ],
)
def test_an_insert_whose_columns_cannot_be_matched_says_why(sql, reason):
    with pytest.raises(LineageError, match=reason):
        extract(sql, schema=SCHEMA)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT * FROM lake.unknown", "table lake.unknown is not registered"),
        ("SELECT a FROM unknown", "table default.unknown is not registered"),
        (
            "SELECT o.id, x.a FROM lake.orders o JOIN lake.unknown x ON o.id = x.id",
            "table lake.unknown is not registered",
        ),
        (
            "SELECT id FROM lake.orders WHERE id IN (SELECT y FROM lake.unknown)",
            "table lake.unknown is not registered",
        ),
    ],
)
def test_a_table_no_schema_knows_makes_no_guessed_edges(sql, reason):
    with pytest.raises(LineageError, match=reason):
        extract(sql, schema=SCHEMA, target="lake.out")


# lineage saw two of lake.seen's columns, no schema registers it: more may exist
SEEN = {"lake": {**SCHEMA["lake"], "seen": {"a": "string", "b": "string"}}}


def test_the_columns_seen_of_a_table_known_only_partly_are_traced():
    traced = extract(
        "SELECT a FROM lake.seen", schema=SEEN, target="lake.out", partly_known={"lake.seen"}
    )
    assert [(e.source, e.target) for e in traced.edges] == [("lake.seen.a", "lake.out.a")]


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT * FROM lake.seen", r"^table lake\.seen is not registered: .* its \* cannot"),
        (
            "SELECT o.id, s.* FROM lake.orders o, lake.seen s",
            r"^table lake\.seen is not registered",
        ),
        ("SELECT c FROM lake.seen", r"could not be resolved.*table lake\.seen is not registered"),
        (
            "INSERT INTO lake.seen SELECT id, amount FROM lake.orders",
            r"^table lake\.seen is not registered: an INSERT without a column list",
        ),
    ],
)
def test_a_table_known_only_partly_makes_no_guessed_edges(sql, reason):
    with pytest.raises(LineageError, match=reason):
        extract(sql, schema=SEEN, target="lake.out", partly_known={"lake.seen"})


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


def test_a_statement_nested_too_deeply_says_what_to_fix():
    with pytest.raises(StatementTooDeep, match=r"nested too deeply.*WITH"):
        extract(deeply_nested(), schema=SCHEMA, target="lake.out")


def test_edges_sort_and_compare_as_values():
    assert ColumnEdge("a.b.c", "d.e.f") < ColumnEdge("a.b.d", "d.e.f")
