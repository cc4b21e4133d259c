"""Column lineage of SQL statements, with sqlglot: which output column comes from which input
columns, through which functions, across joins, subqueries, CTEs, ``SELECT *`` (expanded from
the tables' schemas), aggregates, window functions and unions.

``extract`` is pure (SQL and schemas in, edges out); ``record`` stores the result as nodes
of the query's team (one per table and per column, reused by every query and run of that
team; another team's ``sales.orders`` is another node) and the query's relations. A
statement that cannot be parsed or resolved is kept with the reason.

Lineage never guesses: a statement over a table no schema knows, a ``SELECT *`` over a table
known only from the columns earlier queries touched, or an ``INSERT`` whose columns cannot be
matched to the target's gets a reason and no edges."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import QuerySet
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import Node, to_node
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope, traverse_scope
from sqlglot.schema import ensure_schema

from bdre import sql_parse
from bdre.sql_parse import StatementTooDeep, struct_fields
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind, QueryKind

if TYPE_CHECKING:
    from batches.models import HiveTable
    from processes.models import Process

# db -> table -> column -> type; the same shape sqlglot takes.
Schema = Mapping[str, Mapping[str, Mapping[str, str]]]

DIALECTS = {QueryKind.SPARK_SQL: "spark", QueryKind.HIVE: "hive"}

NOT_REGISTERED = "table {} is not registered"


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
    # An indirect dependency: how the source decides the target's rows, not its value
    # (INDIRECT_KINDS); empty for a direct one.
    indirect: tuple[str, ...] = ()


# Where a column decides which rows a query writes, or how they are grouped, as OpenLineage
# names the indirect transformations: every output column of the statement depends on it.
INDIRECT_KINDS = {
    exp.Where: "filter",
    exp.Having: "filter",
    exp.Qualify: "filter",
    exp.Join: "join",
    exp.Group: "group by",
}


@dataclass
class Extracted:
    target: str  # "db.table"
    columns: list[str]  # the output columns, in order
    sources: list[str]  # the tables read, "db.table", sorted
    edges: list[ColumnEdge] = field(default_factory=list)


@dataclass(frozen=True)
class _Write:
    """What a statement writes: its query, the target table, and how the query's outputs land
    on the target's columns."""

    query: exp.Query
    target: str
    # The target columns the statement names (an INSERT's column list, a CREATE's column
    # definitions), or None.
    columns: list[str] | None = None
    # INSERT fills the target's columns in order whatever the aliases say (Spark and Hive).
    by_position: bool = False
    static_partitions: frozenset[str] = frozenset()
    dynamic_partitions: tuple[str, ...] = ()


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


def _functions(expression: exp.Expr, dialect: str) -> set[str]:
    names = set()
    for func in expression.find_all(exp.Func):
        if isinstance(func, exp.If) and isinstance(func.parent, exp.Case):
            continue  # the branches of a CASE are the CASE
        names.add(_function_name(func, dialect))
    return names


def _statement(sql: str, dialect: str) -> exp.Expr:
    try:
        statements = sql_parse.parse(sql, dialect)
    except SqlglotError as exc:
        raise LineageError(f"cannot parse: {exc}") from exc
    if len(statements) != 1:
        raise LineageError(f"expected one statement, found {len(statements)}")
    return statements[0]


def _partitions(table: exp.Table) -> tuple[frozenset[str], tuple[str, ...]]:
    """The partition columns given a value (``PARTITION (batch_id = 7)``) and those the query
    fills (``PARTITION (batch_id)``)."""
    static, dynamic = set(), []
    partition = table.args.get("partition")
    for spec in partition.expressions if partition else ():
        if isinstance(spec, exp.EQ) and isinstance(spec.this, exp.Column):
            static.add(spec.this.name.lower())
        elif isinstance(spec, exp.Column):
            dynamic.append(spec.name.lower())
    return frozenset(static), tuple(dynamic)


def _write(statement: exp.Expr, target: str | None, default_db: str) -> _Write:
    if isinstance(statement, exp.Insert | exp.Create):
        table, columns = statement.this, None
        if isinstance(table, exp.Schema):
            columns = [c.name.lower() for c in table.expressions]
            table = table.this
        query = statement.expression
        if not isinstance(table, exp.Table) or not isinstance(query, exp.Query):
            raise LineageError("only INSERT ... SELECT and CREATE TABLE ... AS SELECT are read")
        with_ = statement.args.get("with_")
        if with_ and not query.args.get("with_"):
            # WITH ... INSERT INTO t SELECT ...: the CTEs belong to the query
            query = query.copy()
            query.set("with_", with_.copy())
        if isinstance(statement, exp.Create):
            return _Write(query, _table_name(table, default_db), columns)
        static, dynamic = _partitions(table)
        return _Write(
            query,
            _table_name(table, default_db),
            columns,
            by_position=columns is None and not statement.args.get("by_name"),
            static_partitions=static,
            dynamic_partitions=dynamic,
        )
    if isinstance(statement, exp.Query):
        if target is None:
            raise LineageError("a SELECT needs the table it writes to")
        # the step writes the result as a DataFrame: its columns are the query's aliases
        return _Write(statement, target.lower())
    raise LineageError(f"{statement.key.upper()} statements carry no lineage")


def _tables(schema: Schema) -> dict[str, list[str]]:
    """``db.table`` -> its columns in order, as sqlglot matches them (case-insensitively)."""
    return {
        f"{db}.{table}".lower(): [c.lower() for c in columns]
        for db, tables in schema.items()
        for table, columns in tables.items()
    }


def _check_tables_known(
    query: exp.Query, tables: Mapping[str, list[str]], partly: Collection[str], default_db: str
) -> None:
    """Refuse what sqlglot would otherwise guess: a table no schema knows (its ``*`` and its
    columns are taken on trust), and a ``*`` over a table known only partly (it expands to the
    columns known, not to the table's)."""
    read = {
        _table_name(t, default_db)
        for t in query.find_all(exp.Table)
        if t.name and not _is_cte(t, query)
    }
    unknown = sorted(read - tables.keys())
    if len(unknown) == 1:
        raise LineageError(
            f"{NOT_REGISTERED.format(unknown[0])}: its columns could not be resolved"
        )
    if unknown:
        raise LineageError(
            f"tables {', '.join(unknown)} are not registered: their columns could not be resolved"
        )
    for scope in traverse_scope(query):
        if not isinstance(scope.expression, exp.Select):
            continue
        for projection in scope.expression.selects:
            starred: list[exp.Table | Scope | None]
            if isinstance(projection, exp.Star):
                starred = list(scope.sources.values())
            elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
                starred = [scope.sources.get(projection.table)]
            else:
                continue
            for source in starred:
                if isinstance(source, exp.Table):  # a CTE or a subquery is a Scope
                    name = _table_name(source, default_db)
                    if name in partly:
                        raise LineageError(
                            f"{NOT_REGISTERED.format(name)}: only the columns earlier queries "
                            "touched are known, so its * cannot be expanded; register the "
                            "table or name its columns"
                        )


def _target_columns(
    write: _Write, outputs: int, tables: Mapping[str, list[str]], partly: Collection[str]
) -> list[str] | None:
    """The target column each output fills, in order; None when the outputs' own names are
    the target's columns (a SELECT written as a DataFrame, CREATE ... AS SELECT)."""
    known = None if write.target in partly else tables.get(write.target)
    if write.columns is not None:
        names = [*write.columns, *(p for p in write.dynamic_partitions if p not in write.columns)]
        if known is not None:
            missing = [n for n in names if n not in known and n not in write.dynamic_partitions]
            if missing:
                raise LineageError(f"{write.target} has no column {', '.join(missing)}")
    elif write.by_position:
        if known is None:
            raise LineageError(
                f"{NOT_REGISTERED.format(write.target)}: an INSERT without a column list "
                "fills the table's columns in order, and only a registered table says which "
                f"they are; name them (INSERT INTO {write.target} (a, b) SELECT ...) or "
                "register the table"
            )
        partitions = write.static_partitions | set(write.dynamic_partitions)
        names = [*(c for c in known if c not in partitions), *write.dynamic_partitions]
    else:
        return None
    if len(names) != outputs:
        raise LineageError(
            f"the SELECT gives {outputs} columns and {write.target} takes {len(names)} "
            f"({', '.join(names)})"
        )
    return names


def extract(
    sql: str,
    *,
    schema: Schema,
    target: str | None = None,
    dialect: str = "spark",
    default_db: str = "default",
    partly_known: Collection[str] = (),
) -> Extracted:
    """The column lineage of one statement. ``target`` is the table a plain SELECT writes to
    (a ``spark.sql`` step's output table); INSERT and CREATE ... AS name their own.
    ``partly_known`` names the ``db.table`` of ``schema`` whose columns are only those earlier
    queries touched (no registered schema): their columns are trusted, their ``*`` is not.

    An INSERT maps its outputs onto its column list when it has one, else by position onto
    the target's registered columns (less the partitions given a value)."""
    try:
        return _extract(sql, schema, target, dialect, default_db, frozenset(partly_known))
    except RecursionError:
        # sqlglot's qualification and lineage recurse too: the parser's one error for them.
        raise StatementTooDeep() from None


def _extract(
    sql: str,
    schema: Schema,
    target: str | None,
    dialect: str,
    default_db: str,
    partly: frozenset[str],
) -> Extracted:
    write = _write(_statement(sql, dialect), target, default_db)
    tables = _tables(schema)
    _check_tables_known(write.query, tables, partly, default_db)
    try:
        qualified = qualify(
            write.query.copy(),
            schema=dict(schema),  # sqlglot's annotation takes a dict, not any mapping
            dialect=dialect,
            db=default_db,
            validate_qualify_columns=True,
        )
    except SqlglotError as exc:
        seen_only = sorted(
            {_table_name(t, default_db) for t in write.query.find_all(exp.Table)} & partly
        )
        hint = (
            f" ({NOT_REGISTERED.format(', '.join(seen_only))}: only the columns earlier "
            "queries touched are known)"
            if seen_only
            else ""
        )
        raise LineageError(f"cannot resolve the columns: {exc}{hint}") from exc
    sources = sorted(
        {
            _table_name(t, default_db)
            for t in qualified.find_all(exp.Table)
            if t.name and not _is_cte(t, qualified)
        }
    )
    outputs = list(qualified.named_selects)
    columns = _target_columns(write, len(outputs), tables, partly) or outputs
    scope = build_scope(qualified)
    if scope is None:
        raise LineageError("cannot trace a statement that is not a query")
    sqlglot_schema = ensure_schema(dict(schema), dialect=dialect)
    cache: dict[tuple[object, ...], Node] = {}
    # before the direct lineage below, whose tracing rewrites subqueries in the tree
    indirect = _indirect_sources(qualified, dialect, sqlglot_schema, default_db, cache)
    edges: set[ColumnEdge] = set()
    for index, column in enumerate(columns):
        # by position, so that two outputs with one name each keep their own lineage
        root = _trace(index, column, scope, dialect, sqlglot_schema, cache)
        functions: set[str] = set()
        leaves = []
        for node in root.walk():
            if node.downstream:
                functions |= _functions(node.expression, dialect)
            elif isinstance(node.source, exp.Table) and node.source.name:
                # a table function (range(10)) has no name: its columns read no table
                leaves.append((node.source, node.name.rsplit(".", 1)[-1]))
        for table, name in leaves:
            source = f"{_table_name(table, default_db)}.{name.strip(chr(34)).lower()}"
            edges.add(ColumnEdge(source, f"{write.target}.{column}", tuple(sorted(functions))))
    for column in columns:
        target = f"{write.target}.{column}"
        direct = {e.source for e in edges if e.target == target}
        for source, kinds in sorted(indirect.items()):
            if source not in direct:
                edges.add(ColumnEdge(source, target, indirect=tuple(sorted(kinds))))
    return Extracted(write.target, columns, sources, sorted(edges))


def _indirect_sources(
    qualified: exp.Expr,
    dialect: str,
    schema: object,
    default_db: str,
    cache: dict[tuple[object, ...], Node],
) -> dict[str, set[str]]:
    """The table columns each query of the statement filters, joins or groups on, with how
    (INDIRECT_KINDS): a column of a subquery or a CTE traced to the table columns it comes
    from; an outer query's column a correlated subquery compares with; and what a subquery
    in a filter or a join selects (``WHERE id IN (SELECT user_id FROM vip)``: ``vip.user_id``
    filters)."""
    found: dict[str, set[str]] = {}

    def add(column: exp.Column, scope: Scope, kind: str) -> None:
        for name in _column_sources(column, scope, dialect, schema, default_db, cache):
            found.setdefault(name, set()).add(kind)

    for scope in traverse_scope(qualified):
        select = scope.expression
        if not isinstance(select, exp.Select) or _in_projection(scope):
            continue
        for column in scope.columns:
            clause = column.find_ancestor(*INDIRECT_KINDS)
            # a clause of this query, not of an expression's own (a subquery is its scope)
            if clause is None or clause.parent is not select:
                continue
            add(column, scope, INDIRECT_KINDS[type(clause)])
        outer = _outer_clause(scope)
        if outer is not None:
            for projection in select.expressions:
                for column in projection.find_all(exp.Column):
                    add(column, scope, outer)
    return found


def _column_sources(
    column: exp.Column,
    scope: Scope,
    dialect: str,
    schema: object,
    default_db: str,
    cache: dict[tuple[object, ...], Node],
) -> list[str]:
    """The table columns a column of ``scope`` reads: of its own sources, or, for a
    correlated subquery's column of an outer query, of the nearest scope that has it."""
    holder: Scope | None = scope
    while holder is not None and column.table not in holder.sources:
        holder = holder.parent
    source = holder.sources.get(column.table) if holder is not None else None
    if isinstance(source, exp.Table) and source.name:
        return [f"{_table_name(source, default_db)}.{column.name.lower()}"]
    if isinstance(source, Scope):
        return _traced(column.name, source, dialect, schema, default_db, cache)
    return []


def _outer_clause(scope: Scope) -> str | None:
    """How a subquery's selected values act on its parent query's rows when it sits in the
    parent's filter or join (``IN (SELECT ...)``, a comparison with a scalar subquery):
    "filter" or "join"; None elsewhere."""
    if not scope.is_subquery or scope.parent is None:
        return None
    parent = scope.parent.expression
    node: exp.Expr | None = scope.expression
    while node is not None and node.parent is not parent:
        node = node.parent
    # A subquery in the parent's GROUP BY groups by its one value: no filter of rows.
    return next(
        (
            how
            for kind, how in INDIRECT_KINDS.items()
            if isinstance(node, kind) and kind is not exp.Group
        ),
        None,
    )


def _trace(
    output: int | str,
    shown: str,
    scope: Scope,
    dialect: str,
    schema: object,
    cache: dict[tuple[object, ...], Node],
) -> Node:
    """sqlglot's lineage of one output of ``scope`` (by position or name); what it cannot
    trace is the statement's reason, never a guess."""
    try:
        return to_node(output, scope, dialect, schema=schema, _cache=cache)  # type: ignore[arg-type]
    except (SqlglotError, ValueError) as exc:
        raise LineageError(f"cannot trace {shown}: {exc}") from exc


def _in_projection(scope: Scope) -> bool:
    """A subquery giving a value to one output (``(SELECT max(v) FROM b WHERE ...) AS m``):
    its clauses choose the rows of its own value, not the statement's."""
    if not scope.is_subquery or scope.parent is None:
        return False
    node: exp.Expr | None = scope.expression
    while node is not None and node.parent is not scope.parent.expression:
        node = node.parent
    return node is not None and node.arg_key == "expressions"


def _traced(
    name: str,
    scope: Scope,
    dialect: str,
    schema: object,
    default_db: str,
    cache: dict[tuple[object, ...], Node],
) -> list[str]:
    """The table columns an output ``name`` of a subquery or a CTE comes from."""
    root = _trace(name, name, scope, dialect, schema, cache)
    return [
        f"{_table_name(node.source, default_db)}."
        f"{node.name.rsplit('.', 1)[-1].strip(chr(34)).lower()}"
        for node in root.walk()
        if not node.downstream and isinstance(node.source, exp.Table) and node.source.name
    ]


def _is_cte(table: exp.Table, query: exp.Expr) -> bool:
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    return not table.db and table.name in ctes


# --- storing ------------------------------------------------------------------------------


def _node(
    qualified_name: str,
    kind: NodeKind,
    container: LineageNode | None,
    order: int = 0,
    *,
    team_id: int | None = None,
) -> LineageNode:
    """The node of ``qualified_name``: a table of team ``team_id``, or a column of
    ``container`` (its table's team)."""
    display = qualified_name.rsplit(".", 1)[-1] if container else qualified_name
    defaults = {"node_type_id": kind, "display_name": display, "node_order": order}
    if container is not None:
        node, _ = LineageNode.objects.get_or_create(
            container_node=container,
            qualified_name=qualified_name,
            defaults={**defaults, "team_id": container.team_id},
        )
        return node
    node, _ = LineageNode.objects.get_or_create(
        container_node=None, team_id=team_id, qualified_name=qualified_name, defaults=defaults
    )
    return node


def query_team_id(query: LineageQuery) -> int | None:
    """The team whose nodes a query's lineage lands on: its process's (None without one)."""
    if query.process_id is None:
        return None
    return (
        LineageQuery.objects.filter(pk=query.pk)
        .values_list("process__bus_domain__team_id", flat=True)
        .first()
    )


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
    """Store the nodes (the query's team's, reused when they exist) and the query's
    relations: table to table, and column to column with the functions on the way as the
    edge's DOT label."""
    team_id = query_team_id(query)
    tables = {
        name: _node(name, NodeKind.TABLE, None, team_id=team_id)
        for name in [extracted.target, *extracted.sources]
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
        source_column = _node(edge.source, NodeKind.COLUMN, tables[table_name])
        label = dot_label(edge.functions) if not edge.indirect else "[style=dashed]"
        relations.append(
            LineageRelation.objects.update_or_create(
                src_node=source_column,
                target_node=columns[edge.target],
                query=query,
                defaults={"dot_string": label, "indirect": ",".join(edge.indirect)},
            )[0]
        )
    return relations


def record_query(
    query: LineageQuery,
    *,
    schema: Schema,
    target: str | None = None,
    partly_known: Collection[str] = (),
) -> Extracted | None:
    """Extract and store a query's lineage; on failure keep the reason on the query (the
    step that ran it carries on)."""
    dialect = DIALECTS.get(QueryKind(query.query_type_id), "spark")
    try:
        extracted = extract(
            query.query_string,
            schema=schema,
            target=target,
            dialect=dialect,
            partly_known=partly_known,
        )
    except (LineageError, StatementTooDeep) as exc:
        query.parse_error = str(exc)[:2000]
        query.save(update_fields=["parse_error"])
        return None
    record(query, extracted)
    return extracted


# --- queries registered through the API ---------------------------------------------------


def struct_columns(ddl: str) -> dict[str, str]:
    """Columns of a Spark ``struct<a:int,b:array<string>>`` string (a registered table's DDL),
    by lower-case name."""
    return {name.lower(): kind or "string" for name, kind in struct_fields(ddl)}


@dataclass(frozen=True)
class KnownSchema:
    schema: dict[str, dict[str, dict[str, str]]]
    # db.table known only from the column nodes of earlier queries: maybe not all its columns
    partly: frozenset[str]


def known_schema(tables: QuerySet[HiveTable], nodes: QuerySet[LineageNode]) -> KnownSchema:
    """``{db: {table: {column: type}}}`` from registered tables (``HiveTable`` querysets: their
    DDL) and from the table nodes of ``nodes`` with their column nodes in ``nodes`` (give one
    team's, ``lineage.visibility.team_nodes``: another team's columns of a name never become
    known); a registered table's types win, and a table known only from nodes is known
    partly."""
    schema: dict[str, dict[str, dict[str, str]]] = {}
    for table_node, column in (
        nodes.filter(container_node__in=nodes.filter(container_node__isnull=True))
        .exclude(display_name="*")  # left by queries read before lineage stopped guessing
        # a folder or a database table a step read or wrote (lineage.steps), not a table a
        # query can name: file:///landing/x, jdbc:derby:memory:db#T
        .exclude(container_node__qualified_name__contains="/")
        .exclude(container_node__qualified_name__contains=":")
        .order_by("container_node_id", "node_order", "id")
        .values_list("container_node__qualified_name", "display_name")
    ):
        database, _, table = table_node.rpartition(".")
        schema.setdefault(database or "default", {}).setdefault(table, {})[column] = "string"
    partly = {f"{db}.{table}" for db, known in schema.items() for table in known}
    for dbname, table_name, ddl in tables.values_list("dbname", "table_name", "ddl"):
        columns = struct_columns(ddl)
        if columns:
            schema.setdefault(dbname.lower(), {})[table_name.lower()] = columns
            partly.discard(f"{dbname}.{table_name}".lower())
    return KnownSchema(schema, frozenset(partly))


@transaction.atomic
def register_query(
    sql: str,
    *,
    kind: QueryKind,
    process: Process | None,
    schema: Schema,
    target: str | None = None,
    partly_known: Collection[str] = (),
) -> LineageQuery:
    """Keep a query (one run by a tool BDRE does not drive, say) and record its lineage; a
    query that cannot be read is kept with the reason. A statement nested too deeply raises
    ``StatementTooDeep`` and nothing is kept: its author has to flatten it."""
    dialect = DIALECTS.get(kind, "spark")
    try:
        extracted = extract(
            sql, schema=schema, target=target, dialect=dialect, partly_known=partly_known
        )
    except LineageError as exc:
        extracted, reason = None, str(exc)[:2000]
    else:
        reason = ""
    query = LineageQuery.objects.create(
        query_string=sql, query_type_id=kind, process=process, parse_error=reason
    )
    if extracted is not None:
        record(query, extracted)
    return query
