"""Column lineage of SQL statements, with sqlglot: which output column comes from which input
columns, through which functions, across joins, subqueries, CTEs, ``SELECT *`` (expanded from
the tables' schemas), aggregates, window functions and unions.

``extract`` is pure (SQL and schemas in, edges out); ``record`` stores the result as shared
nodes (one per table and per column, reused by every query and run) and the query's
relations. A statement that cannot be parsed or resolved is kept with the reason."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlglot
from django.db import transaction
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import lineage as column_lineage
from sqlglot.optimizer.qualify import qualify

from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind, QueryKind

# db -> table -> column -> type; the same shape sqlglot takes.
Schema = Mapping[str, Mapping[str, Mapping[str, str]]]

DIALECTS = {QueryKind.SPARK_SQL: "spark", QueryKind.HIVE: "hive"}


class LineageError(ValueError):
    """The statement cannot be parsed, or names a table or column no schema knows."""

    def __init__(self, message: str) -> None:
        # sqlglot underlines the culprit with terminal escapes: keep the text only.
        super().__init__(re.sub(r"\x1b\[[0-9;]*m", "", message))


@dataclass(frozen=True, order=True)
class ColumnEdge:
    source: str  # "db.table.column"
    target: str
    functions: tuple[str, ...] = ()  # the functions the value goes through, by name


@dataclass
class Extracted:
    target: str  # "db.table"
    columns: list[str]  # the output columns, in order
    sources: list[str]  # the tables read, "db.table", sorted
    edges: list[ColumnEdge] = field(default_factory=list)


def _table_name(table: exp.Table, default_db: str) -> str:
    return f"{table.db or default_db}.{table.name}".lower()


def _function_name(func: exp.Func, dialect: str) -> str:
    """The name the dialect writes (``TO_DATE``, not sqlglot's ``TS_OR_DS_TO_DATE``)."""
    if isinstance(func, exp.Case):
        return "CASE"
    if isinstance(func, exp.Anonymous):
        return str(func.name).upper()
    written = re.match(r"[A-Za-z_][A-Za-z0-9_]*", func.sql(dialect=dialect))
    return written.group(0).upper() if written else func.sql_name().upper()


def _functions(expression: exp.Expression, dialect: str) -> set[str]:
    names = set()
    for func in expression.find_all(exp.Func):
        if isinstance(func, exp.If) and isinstance(func.parent, exp.Case):
            continue  # the branches of a CASE are the CASE
        names.add(_function_name(func, dialect))
    return names


def _statement(sql: str, dialect: str) -> exp.Expression:
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as exc:
        raise LineageError(f"cannot parse: {exc}") from exc
    if len(statements) != 1:
        raise LineageError(f"expected one statement, found {len(statements)}")
    return statements[0]


def _query_and_target(
    statement: exp.Expression, target: str | None, default_db: str
) -> tuple[exp.Query, str]:
    if isinstance(statement, exp.Insert | exp.Create):
        table = statement.this
        if isinstance(table, exp.Schema):
            table = table.this
        query = statement.expression
        if not isinstance(table, exp.Table) or not isinstance(query, exp.Query):
            raise LineageError("only INSERT ... SELECT and CREATE TABLE ... AS SELECT are read")
        return query, _table_name(table, default_db)
    if isinstance(statement, exp.Query):
        if target is None:
            raise LineageError("a SELECT needs the table it writes to")
        return statement, target.lower()
    raise LineageError(f"{statement.key.upper()} statements carry no lineage")


def extract(
    sql: str,
    *,
    schema: Schema,
    target: str | None = None,
    dialect: str = "spark",
    default_db: str = "default",
) -> Extracted:
    """The column lineage of one statement. ``target`` is the table a plain SELECT writes to
    (a ``spark.sql`` step's output table); INSERT and CREATE ... AS name their own."""
    query, target_table = _query_and_target(_statement(sql, dialect), target, default_db)
    try:
        qualified = qualify(
            query.copy(),
            schema=schema,
            dialect=dialect,
            db=default_db,
            validate_qualify_columns=True,
        )
    except SqlglotError as exc:
        raise LineageError(f"cannot resolve the columns: {exc}") from exc
    sources = sorted(
        {
            _table_name(t, default_db)
            for t in qualified.find_all(exp.Table)
            if t.name and not _is_cte(t, qualified)
        }
    )
    columns = list(qualified.named_selects)
    edges: set[ColumnEdge] = set()
    for column in columns:
        try:
            root = column_lineage(column, qualified, schema=schema, dialect=dialect)
        except SqlglotError as exc:
            raise LineageError(f"cannot trace {column}: {exc}") from exc
        functions: set[str] = set()
        leaves = []
        for node in root.walk():
            if node.downstream:
                functions |= _functions(node.expression, dialect)
            elif isinstance(node.source, exp.Table):
                leaves.append((node.source, node.name.rsplit(".", 1)[-1]))
        for table, name in leaves:
            source = f"{_table_name(table, default_db)}.{name.strip(chr(34)).lower()}"
            edges.add(ColumnEdge(source, f"{target_table}.{column}", tuple(sorted(functions))))
    return Extracted(target_table, columns, sources, sorted(edges))


def _is_cte(table: exp.Table, query: exp.Expression) -> bool:
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    return not table.db and table.name in ctes


# --- storing ------------------------------------------------------------------------------


def _node(qualified_name: str, kind: NodeKind, container: LineageNode | None, order: int = 0):
    display = qualified_name.rsplit(".", 1)[-1] if container else qualified_name
    node, _ = LineageNode.objects.get_or_create(
        container_node=container,
        qualified_name=qualified_name,
        defaults={"node_type_id": kind, "display_name": display, "node_order": order},
    )
    return node


def dot_label(functions: tuple[str, ...] | list[str]) -> str:
    """A column relation's DOT attributes: the functions on the way, ``[label="SUM, CAST"]``."""
    return f'[label="{", ".join(functions)}"]' if functions else ""


def edge_functions(relation_dot: str) -> list[str]:
    """The functions of a relation, read back from what :func:`dot_label` wrote."""
    if 'label="' not in relation_dot:
        return []
    label = relation_dot.split('label="', 1)[1].rsplit('"', 1)[0]
    return [f for f in label.split(", ") if f]


@transaction.atomic
def record(query: LineageQuery, extracted: Extracted) -> list[LineageRelation]:
    """Store the nodes (reused when they exist) and the query's relations: table to table,
    and column to column with the functions on the way as the edge's DOT label."""
    tables = {
        name: _node(name, NodeKind.TABLE, None) for name in [extracted.target, *extracted.sources]
    }
    target = tables[extracted.target]
    columns = {
        f"{extracted.target}.{c}": _node(f"{extracted.target}.{c}", NodeKind.COLUMN, target, i)
        for i, c in enumerate(extracted.columns)
    }
    relations = []
    for source in extracted.sources:
        relations.append(
            LineageRelation.objects.get_or_create(
                src_node=tables[source], target_node=target, query=query
            )[0]
        )
    for edge in extracted.edges:
        table_name = edge.source.rsplit(".", 1)[0]
        source = _node(edge.source, NodeKind.COLUMN, tables[table_name])
        label = dot_label(edge.functions)
        relations.append(
            LineageRelation.objects.update_or_create(
                src_node=source,
                target_node=columns[edge.target],
                query=query,
                defaults={"dot_string": label},
            )[0]
        )
    return relations


def record_query(
    query: LineageQuery, *, schema: Schema, target: str | None = None
) -> Extracted | None:
    """Extract and store a query's lineage; on failure keep the reason on the query (the
    step that ran it carries on)."""
    dialect = DIALECTS.get(QueryKind(query.query_type_id), "spark")
    try:
        extracted = extract(query.query_string, schema=schema, target=target, dialect=dialect)
    except LineageError as exc:
        query.parse_error = str(exc)[:2000]
        query.save(update_fields=["parse_error"])
        return None
    record(query, extracted)
    return extracted


# --- queries registered through the API ---------------------------------------------------


def struct_columns(ddl: str) -> dict[str, str]:
    """Columns of a Spark ``struct<a:int,b:array<string>>`` string (a registered table's DDL),
    split on the top-level commas only."""
    body = ddl.strip()
    if not (body.startswith("struct<") and body.endswith(">")):
        return {}
    body = body[len("struct<") : -1]
    columns, depth, start = {}, 0, 0
    for i, char in enumerate(body + ","):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            name, _, kind = body[start:i].partition(":")
            if name.strip():
                columns[name.strip().strip("`").lower()] = kind.strip() or "string"
            start = i + 1
    return columns


def known_schema(tables, nodes) -> dict[str, dict[str, dict[str, str]]]:
    """``{db: {table: {column: type}}}`` from registered tables (``HiveTable`` querysets: their
    DDL) and from table nodes with their column nodes; a registered table's types win."""
    schema: dict[str, dict[str, dict[str, str]]] = {}
    for table_node, column in (
        LineageNode.objects.filter(container_node__in=nodes.filter(container_node__isnull=True))
        .order_by("container_node_id", "node_order", "id")
        .values_list("container_node__qualified_name", "display_name")
    ):
        database, _, table = table_node.rpartition(".")
        schema.setdefault(database or "default", {}).setdefault(table, {})[column] = "string"
    for dbname, table_name, ddl in tables.values_list("dbname", "table_name", "ddl"):
        columns = struct_columns(ddl)
        if columns:
            schema.setdefault(dbname.lower(), {})[table_name.lower()] = columns
    return schema


@transaction.atomic
def register_query(
    sql: str, *, kind: QueryKind, process, schema: Schema, target: str | None = None
) -> LineageQuery:
    """Keep a query (one run by a tool BDRE does not drive, say) and record its lineage; a
    query that cannot be read is kept with the reason."""
    query = LineageQuery.objects.create(query_string=sql, query_type_id=kind, process=process)
    record_query(query, schema=schema, target=target)
    return query
