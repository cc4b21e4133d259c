"""The lineage of the step kinds that run no SQL (``lineage.steps``): a step's column mapping
kept as a query of its run, on its team's nodes, once per run. Each kind's own mapping, from
the frames it builds, is tested in tests/processes/step_kinds/test_step_lineage.py."""

from __future__ import annotations

import pytest

from batches.models import HiveTable
from lineage import visibility
from lineage.extract import edge_functions, known_schema, record_query
from lineage.models import LineageNode, LineageQuery, LineageRelation, QueryKind
from lineage.steps import (
    StepLineage,
    Write,
    folder_of,
    jdbc_base,
    jdbc_name,
    record_step,
    table_name,
)
from processes.step_kinds import spec_of
from tests.helpers.factories import InstanceExecFactory, JobFactory, StepFactory

pytestmark = pytest.mark.django_db


def step_of(application):
    return StepFactory(parent=JobFactory(bus_domain=application), bus_domain=application)


def orders_cleansed() -> StepLineage:
    clean = Write("lake.orders", ["ID", "amount", "note"])
    clean.feed("lake.orders_raw", "id", "id", "cleanse rule", "cast")
    clean.feed("lake.orders_raw", "amount", "amount")
    clean.feed("lake.orders_raw", "note", "note")
    return StepLineage("spark.cleanse: lake.orders_raw into lake.orders", [clean])


def run(step, kind: str, describe) -> LineageQuery:
    exec_ = InstanceExecFactory(process=step)
    query = record_step(
        kind, spec_of(kind).query_kind, process_id=step.pk, run_id=exec_.pk, describe=describe
    )
    assert query is not None
    return query


def edges(query: LineageQuery) -> set[tuple[str, str, tuple[str, ...]]]:
    return {
        (
            r.src_node.qualified_name,
            r.target_node.qualified_name,
            tuple(edge_functions(r.dot_string)),
        )
        for r in query.relations.select_related("src_node", "target_node")
    }


def test_a_step_mapping_is_a_query_of_its_run_with_table_and_column_edges(team):
    step = step_of(team.application)
    query = run(step, "spark.cleanse", orders_cleansed)
    assert query.query_type_id == QueryKind.SPARK_CLEANSE
    assert (query.process, query.parse_error) == (step, "")
    assert query.query_string == "spark.cleanse: lake.orders_raw into lake.orders"
    assert edges(query) == {
        ("lake.orders_raw", "lake.orders", ()),
        ("lake.orders_raw.id", "lake.orders.id", ("cleanse rule", "cast")),
        ("lake.orders_raw.amount", "lake.orders.amount", ()),
        ("lake.orders_raw.note", "lake.orders.note", ()),
    }
    target = LineageNode.objects.get(qualified_name="lake.orders")
    assert target.team == team.group
    assert [c.display_name for c in visibility.columns(team.developer, target)] == [
        "id",
        "amount",
        "note",
    ]


def test_a_column_nothing_feeds_has_a_node_and_no_edge(team):
    def loaded() -> StepLineage:
        written = Write("lake.raw", ["id", "source_file"])
        written.feed("file:///landing/in", "id", "id")
        return StepLineage("load", [written])

    query = run(step_of(team.application), "spark.load", loaded)
    assert LineageNode.objects.filter(qualified_name="lake.raw.source_file").exists()
    assert edges(query) == {
        ("file:///landing/in", "lake.raw", ()),
        ("file:///landing/in.id", "lake.raw.id", ()),
    }


def test_a_rerun_reuses_the_nodes_and_has_its_own_relations(team):
    step = step_of(team.application)
    first = run(step, "spark.cleanse", orders_cleansed)
    nodes = LineageNode.objects.count()
    second = run(step, "spark.cleanse", orders_cleansed)
    assert LineageNode.objects.count() == nodes
    assert first.pk != second.pk and edges(first) == edges(second)
    assert LineageRelation.objects.count() == 2 * len(edges(first))


def test_recording_a_run_again_replaces_its_relations(team):
    step = step_of(team.application)
    exec_ = InstanceExecFactory(process=step)
    record_step(
        "spark.cleanse",
        QueryKind.SPARK_CLEANSE,
        process_id=step.pk,
        run_id=exec_.pk,
        describe=orders_cleansed,
    )

    def fewer() -> StepLineage:
        clean = Write("lake.orders", ["id"])
        clean.feed("lake.orders_raw", "id", "id", "cast")
        return StepLineage("again", [clean])

    query = record_step(
        "spark.cleanse",
        QueryKind.SPARK_CLEANSE,
        process_id=step.pk,
        run_id=exec_.pk,
        describe=fewer,
    )
    assert query is not None
    assert LineageQuery.objects.filter(instance_exec=exec_).count() == 1
    assert edges(query) == {
        ("lake.orders_raw", "lake.orders", ()),
        ("lake.orders_raw.id", "lake.orders.id", ("cast",)),
    }
    assert query.query_string == "again"


def test_another_teams_same_named_tables_get_their_own_nodes(team):
    ours = run(step_of(team.application), "spark.cleanse", orders_cleansed)
    theirs = run(step_of(team.other_application), "spark.cleanse", orders_cleansed)
    assert edges(ours) == edges(theirs)
    tables = LineageNode.objects.filter(qualified_name="lake.orders")
    assert {t.team for t in tables} == {team.group, team.other_group}
    for query in (ours, theirs):
        teams = {
            node.team_id
            for relation in query.relations.all()
            for node in (relation.src_node, relation.target_node)
        }
        assert teams == {query.process.bus_domain.team_id}
    # and the SQL lineage of the team reads its own cleansed table, never the other's
    sql = LineageQuery.objects.create(
        query_string="SELECT id FROM lake.orders",
        query_type_id=QueryKind.SPARK_SQL,
        process=step_of(team.application),
    )
    record_query(sql, schema={"lake": {"orders": {"id": "int"}}}, target="lake.ids")
    relation = sql.relations.get(src_node__qualified_name="lake.orders")
    assert relation.src_node.team == team.group
    assert (
        relation.src_node
        == ours.relations.get(target_node__qualified_name="lake.orders").target_node
    )
    visible = set(visibility.relations(team.developer).values_list("query_id", flat=True))
    assert ours.pk in visible and theirs.pk not in visible


def test_a_failing_mapping_keeps_the_reason_and_never_raises(team):
    def broken() -> StepLineage:
        raise RuntimeError("the schema is gone")

    query = run(step_of(team.application), "spark.export", broken)
    assert query.parse_error == "lineage failed: the schema is gone"
    assert not query.relations.exists()


def test_a_database_error_while_storing_leaves_the_callers_transaction_usable(team, monkeypatch):
    """The statement the database refuses is undone alone (a savepoint): on PostgreSQL it
    would otherwise abort the caller's whole transaction, the step's own writes with it."""
    from django.db import connection

    import lineage.steps

    def refused(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM lineage_lineagequery")

    step = step_of(team.application)
    monkeypatch.setattr(lineage.steps, "_store", refused)
    query = run(step, "spark.load", orders_cleansed)
    assert query.parse_error.startswith("lineage failed:")
    assert LineageQuery.objects.get(pk=query.pk).parse_error == query.parse_error


def test_a_database_lost_while_recording_never_fails_the_step(team, monkeypatch):
    """The connection drops as the mapping is stored: the step's own writes are done, and
    keeping the reason fails as well; the step goes on (the error is logged)."""
    from django.db import OperationalError

    import lineage.steps

    def lost(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    step = step_of(team.application)
    # recorded once already (a redelivered step): the query is there, the store fails
    exec_ = run(step, "spark.cleanse", orders_cleansed).instance_exec
    monkeypatch.setattr(lineage.steps, "_store", lost)
    monkeypatch.setattr(LineageQuery, "save", lost)
    record_step(
        "spark.cleanse",
        QueryKind.SPARK_CLEANSE,
        process_id=step.pk,
        run_id=exec_.pk,
        describe=orders_cleansed,
    )
    assert LineageQuery.objects.filter(instance_exec=exec_).count() == 1


def test_a_column_the_target_does_not_have_is_a_mistake_kept_as_the_reason(team):
    def wrong() -> StepLineage:
        written = Write("lake.t", ["a"])
        written.feed("lake.s", "a", "b")
        return StepLineage("x", [written])

    query = run(step_of(team.application), "spark.export", wrong)
    assert query.parse_error == "lineage failed: lake.t has no column b"


def test_folders_and_database_tables_are_no_tables_a_query_can_name(team):
    def exported() -> StepLineage:
        files = Write("file:///exports/v1.2/orders", ["id"])
        files.feed("lake.orders", "id", "id")
        database = Write(jdbc_name("jdbc:derby:memory:x", "T"), ["id"])
        database.feed("lake.orders", "id", "id")
        return StepLineage("export", [files, database])

    run(step_of(team.application), "spark.export", exported)
    known = known_schema(HiveTable.objects.none(), visibility.team_nodes(team.group.pk))
    assert known.schema == {"lake": {"orders": {"id": "string"}}}
    assert known.partly == {"lake.orders"}


def test_names():
    assert table_name("Orders") == "default.orders"
    assert table_name("Lake.Orders") == "lake.orders"
    assert folder_of("s3://bucket/in/a.csv") == "s3://bucket/in"
    assert folder_of("/landing/team-1/a.tsv") == "/landing/team-1"
    assert (
        jdbc_name("jdbc:postgresql://bob:secret@db:5432/app?password=x", "public.orders")
        == "jdbc:postgresql://db:5432/app#public.orders"
    )
    assert jdbc_name("jdbc:derby:memory:x;create=true", "T") == "jdbc:derby:memory:x#T"


@pytest.mark.parametrize(
    "url, base",
    [
        # Oracle's thin driver (one of BDRE_JDBC_DRIVERS') takes user/password before the @
        ("jdbc:oracle:thin:scott/tiger@//db:1521/sales", "jdbc:oracle:thin:@//db:1521/sales"),
        ("jdbc:oracle:thin:scott/t@ger@db:1521:orcl", "jdbc:oracle:thin:@db:1521:orcl"),
        ("jdbc:mysql://bob:p@ss@db:3306/app", "jdbc:mysql://db:3306/app"),
        ("jdbc:sqlserver://db:1433;user=bob;password=x", "jdbc:sqlserver://db:1433"),
    ],
)
def test_a_database_is_named_without_its_credentials(url, base):
    assert jdbc_base(url) == base
