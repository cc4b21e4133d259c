"""Column lineage of the step kinds that run no SQL (``spark.load``, ``spark.cleanse``,
``spark.shred``, ``spark.export``, and any kind whose spec names a ``query_kind``;
docs/lineage.md, "Lineage of the step kinds").

A step says what it wrote (a :class:`Write` per table or location: its columns in order,
what it read for it, and which column came from which, through what) from the frames it
built, their schemas and never their rows. :func:`record_step` keeps it as one
``LineageQuery`` of the step's run (the query type its kind names), stored as a SQL step's is
(``lineage.extract.record``): the nodes are the step's team's, reused by every run and query
of that team (another team's ``lake.orders`` is another node), the relations the query's,
and what a value went through (``cast``, ``cleanse rule``, ``dedup``) is the edge's label.

A folder or a database table outside the warehouse (the files a load read, what an export
wrote) is a node like a table, named by where it is: ``file:///landing/orders``, or
``jdbc:postgresql://db/app#public.orders`` (the URL without its options or credentials)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import DatabaseError, transaction

from lineage.extract import ColumnEdge, _node, dot_label, edge_functions, query_team_id
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind

log = logging.getLogger(__name__)


def table_name(name: str) -> str:
    """A step's ``db.table`` (or ``table``, in ``default``) as lineage names it: as the SQL
    lineage does, so that a SQL step reading the table lands on the same nodes."""
    database, _, table = name.strip().rpartition(".")
    return f"{database or 'default'}.{table}".lower()


def folder_of(path: str) -> str:
    """The folder of a claimed file (``s3://bucket/in/a.csv`` -> ``s3://bucket/in``)."""
    folder = path.rstrip("/").rpartition("/")[0]
    return folder or path


def jdbc_base(url: str) -> str:
    """A JDBC URL without options (``?user=..``, ``;create=true``) nor credentials
    (``//user:secret@host``, Oracle's ``thin:user/secret@host``): what lineage and its
    events may show of a database."""
    base = re.split(r"[?;]", url, maxsplit=1)[0]
    base = re.sub(r"^(jdbc:oracle:\w+:).*@", r"\1@", base)  # up to the last @: one in a secret
    return re.sub(r"//[^/]*@", "//", base)


def jdbc_name(url: str, table: str) -> str:
    """A database table an export wrote: ``jdbc_base(url)``, then ``#`` and the table."""
    return f"{jdbc_base(url)}#{table}"


@dataclass
class Write:
    """A table or location a step wrote: its columns in order, the tables and locations it
    read for it, and where each column came from (a column nothing feeds, a constant or the
    file's name, has a node and no edge)."""

    target: str
    columns: list[str]
    sources: list[str] = field(default_factory=list)
    edges: list[ColumnEdge] = field(default_factory=list)
    # a source column's node name -> (its table, its name): a column's name may hold a dot
    inputs: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.columns = [c.lower() for c in self.columns]

    def read(self, source: str) -> Write:
        """``source`` was read for the target (a table to table edge)."""
        if source not in self.sources:
            self.sources.append(source)
        return self

    def feed(self, source: str, source_column: str, column: str, *through: str) -> None:
        """``column`` comes from ``source_column`` of ``source``, through ``through``."""
        if column.lower() not in self.columns:
            raise ValueError(f"{self.target} has no column {column}")
        self.read(source)
        name = f"{source}.{source_column.lower()}"
        self.inputs[name] = (source, source_column.lower())
        edge = ColumnEdge(name, f"{self.target}.{column.lower()}", through)
        if edge not in self.edges:
            self.edges.append(edge)

    def same(self, source: str, columns: Iterable[str], *through: str) -> None:
        """Each of ``columns`` comes from the column of its name in ``source``."""
        for column in columns:
            self.feed(source, column, column, *through)


@dataclass
class StepLineage:
    summary: str  # what the step did, kept as the query's text
    writes: list[Write]


def record_quarantines(run_id: int, quarantined: list[tuple[str, str]]) -> None:
    """The quarantine tables a step run's expectations wrote (``(table, quarantine)``,
    ``db.table`` each): each is fed as its table was in the run's lineage, its columns
    through the expectation (``expect``). Never the step's failure."""
    try:
        with transaction.atomic():
            for query in LineageQuery.objects.filter(instance_exec_id=run_id):
                for table, quarantine in quarantined:
                    _feed_quarantine(query, table_name(table), table_name(quarantine))
    except DatabaseError:
        log.exception("lineage: cannot keep the quarantines of step run %s", run_id)


def _feed_quarantine(query: LineageQuery, table: str, quarantine: str) -> None:
    relations = query.relations.select_related("src_node", "target_node__container_node")
    for relation in list(relations):
        node = relation.target_node
        container = node.container_node
        if container is None and node.qualified_name == table:
            held = _node(quarantine, NodeKind.TABLE, None, team_id=node.team_id)
            LineageRelation.objects.get_or_create(
                src_node=relation.src_node, target_node=held, query=query
            )
        elif container is not None and container.qualified_name == table:
            held = _node(quarantine, NodeKind.TABLE, None, team_id=container.team_id)
            column = _node(
                f"{quarantine}.{node.display_name}", NodeKind.COLUMN, held, node.node_order
            )
            if relation.indirect:  # the rows the query chose: the quarantine's too
                kept = {"dot_string": relation.dot_string, "indirect": relation.indirect}
            else:
                functions = (*edge_functions(relation.dot_string), "expect")
                kept = {"dot_string": dot_label(functions), "indirect": ""}
            LineageRelation.objects.update_or_create(
                src_node=relation.src_node, target_node=column, query=query, defaults=kept
            )


def record_step(
    kind: str,
    query_kind: int,
    *,
    process_id: int,
    run_id: int,
    describe: Callable[[], StepLineage],
) -> LineageQuery | None:
    """Record what ``describe`` says a step run of ``kind`` wrote as the run's query of type
    ``query_kind`` (the kind's spec names it; one per run: recorded again, its relations are
    replaced).

    Lineage is a record of the step, never a reason for it to fail: an error, in
    ``describe`` (a schema Spark could not give) or in storing, is kept on the query as
    its reason."""
    # Each write in a savepoint of its own: inside a caller's transaction, an error of the
    # database (PostgreSQL aborts the whole transaction on one) stays in the savepoint.
    try:
        with transaction.atomic():
            query, _ = LineageQuery.objects.get_or_create(
                instance_exec_id=run_id,
                query_type_id=query_kind,
                defaults={"process_id": process_id, "query_string": kind},
            )
    except DatabaseError:
        log.exception("lineage: cannot keep the query of %s run %s", kind, run_id)
        return None
    try:
        lineage = describe()
        with transaction.atomic():
            query.relations.all().delete()
            _store(query, lineage.writes)
            query.query_string, query.parse_error = lineage.summary, ""
            query.save(update_fields=["query_string", "parse_error"])
    except Exception as exc:
        query.parse_error = f"lineage failed: {exc}"[:2000]
        try:
            with transaction.atomic():
                query.save(update_fields=["parse_error"])
        except DatabaseError:  # the database is gone: the step's own writes are done
            log.exception("lineage: cannot keep why %s run %s has no lineage", kind, run_id)
    return query


def _store(query: LineageQuery, writes: list[Write]) -> None:
    """What ``lineage.extract.record`` stores for a statement, for every write of a step: the
    nodes of the query's team (reused), and the query's relations. In a few statements,
    not a few per edge: a shred writes hundreds of edges in every run."""
    team_id = query_team_id(query)
    names = dict.fromkeys(name for w in writes for name in (w.target, *w.sources))
    tables = {name: _node(name, NodeKind.TABLE, None, team_id=team_id) for name in names}
    # column node -> (its table, its name, its order): a written column has its place
    wanted: dict[str, tuple[str, str, int]] = {}
    for write in writes:
        for name, (table, column) in write.inputs.items():
            wanted.setdefault(name, (table, column, 0))
    for write in writes:
        for order, column in enumerate(write.columns):
            wanted[f"{write.target}.{column}"] = (write.target, column, order)
    by_id = {table.pk: name for name, table in tables.items()}

    def existing() -> dict[str, LineageNode]:
        found = LineageNode.objects.filter(container_node__in=list(tables.values()))
        return {
            node.qualified_name: node
            for node in found
            if node.qualified_name in wanted
            and wanted[node.qualified_name][0] == by_id[node.container_node_id or 0]
        }

    columns = existing()
    LineageNode.objects.bulk_create(
        [
            LineageNode(
                node_type_id=NodeKind.COLUMN,
                container_node=tables[table],
                qualified_name=name,
                display_name=column,
                node_order=order,
                team_id=tables[table].team_id,
            )
            for name, (table, column, order) in wanted.items()
            if name not in columns
        ],
        ignore_conflicts=True,  # a node another run made meanwhile is that node
    )
    columns = existing()
    relations: dict[tuple[int, int], str] = {}
    for write in writes:
        target = tables[write.target]
        for source in write.sources:
            relations.setdefault((tables[source].pk, target.pk), "")
        for edge in write.edges:
            key = (columns[edge.source].pk, columns[edge.target].pk)
            relations[key] = dot_label(edge.functions)
    LineageRelation.objects.bulk_create(
        LineageRelation(src_node_id=src, target_node_id=dst, query=query, dot_string=dot)
        for (src, dst), dot in relations.items()
    )
