"""Column lineage as graphs: the tables upstream and downstream of a table, the columns a
column comes from and flows into, and a column's impact list. Built from the relations and
nodes the caller gives, already scoped to the user (``lineage.visibility``): a node not in
the ``nodes`` given is dropped, with its edges."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from lineage.extract import edge_functions
from lineage.graphs.model import Graph, GraphNode
from lineage.models import LineageNode, LineageRelation


def _lineage_node(node: LineageNode, focus: bool = False) -> GraphNode:
    if node.container_node_id:
        table = node.qualified_name.rsplit(".", 1)[0]
        return GraphNode(
            f"n{node.pk}", node.display_name, "column", table, ref=node.pk, focus=focus
        )
    return GraphNode(f"n{node.pk}", node.qualified_name, "table", ref=node.pk, focus=focus)


@dataclass
class _Hop:
    source: int
    target: int
    functions: list[str]  # of the direct relations between the two
    distance: int
    indirect: list[str]  # how the source decides the target's rows, when no relation is direct

    @property
    def label(self) -> str:
        return ", ".join(self.functions if not self.indirect else self.indirect)


def _walk_relations(
    start: list[int], relations: QuerySet[LineageRelation], *, upstream: bool, depth: int
) -> list[_Hop]:
    """The hops of the relations reached from ``start`` in one direction, one query per
    level; the functions (or indirect kinds) of every query's edge between the same two
    nodes together, and a hop direct when any of them is."""
    found: dict[tuple[int, int], _Hop] = {}
    direct: set[tuple[int, int]] = set()
    seen, frontier = set(start), list(start)
    for level in range(1, depth + 1):
        if not frontier:
            break
        key = "target_node_id__in" if upstream else "src_node_id__in"
        rows = relations.filter(**{key: frontier}).values_list(
            "src_node_id", "target_node_id", "dot_string", "indirect"
        )
        nxt = []
        for src, dst, dot, indirect in rows:
            hop = found.setdefault((src, dst), _Hop(src, dst, [], level, []))
            if indirect:
                hop.indirect += [k for k in indirect.split(",") if k not in hop.indirect]
            else:
                direct.add((src, dst))
                hop.functions += [f for f in edge_functions(dot) if f not in hop.functions]
            reached = src if upstream else dst
            if reached not in seen:
                seen.add(reached)
                nxt.append(reached)
        frontier = nxt
    for pair in direct:
        found[pair].indirect = []
    return list(found.values())


@dataclass
class Impact:
    node_id: int
    qualified_name: str
    kind: str
    distance: int  # hops from the column asked about
    functions: list[str]


def _shown(nodes: QuerySet[LineageNode] | None) -> QuerySet[LineageNode]:
    return LineageNode.objects.all() if nodes is None else nodes


def impact(
    node: LineageNode,
    relations: QuerySet[LineageRelation],
    *,
    upstream: bool,
    depth: int = 50,
    nodes: QuerySet[LineageNode] | None = None,
) -> list[Impact]:
    """Every node the value of ``node`` comes from (``upstream``) or flows into, nearest
    first, with the functions on the edges that reach it; only nodes of ``nodes`` (all when
    None)."""
    rows = _walk_relations([node.pk], relations, upstream=upstream, depth=depth)
    best: dict[int, tuple[int, set[str]]] = {}
    for hop in rows:
        reached = hop.source if upstream else hop.target
        old = best.get(reached, (hop.distance, set()))
        best[reached] = (min(old[0], hop.distance), old[1] | set(hop.functions))
    found_nodes = _shown(nodes).in_bulk(list(best))
    found = [
        Impact(
            pk,
            found_nodes[pk].qualified_name,
            "column" if found_nodes[pk].container_node_id else "table",
            distance,
            sorted(functions),
        )
        for pk, (distance, functions) in best.items()
        if pk in found_nodes
    ]
    return sorted(found, key=lambda i: (i.distance, i.qualified_name))


def _lineage_graph(
    kind: str,
    title: str,
    start: list[LineageNode],
    relations: QuerySet[LineageRelation],
    depth: int,
    focus: set[int],
    nodes: QuerySet[LineageNode] | None,
) -> Graph:
    graph = Graph(kind, title)
    ids = [n.pk for n in start]
    rows = _walk_relations(ids, relations, upstream=True, depth=depth)
    rows += _walk_relations(ids, relations, upstream=False, depth=depth)
    wanted = set(ids) | {r.source for r in rows} | {r.target for r in rows}
    found = _shown(nodes).in_bulk(list(wanted))
    for pk in [*ids, *sorted(wanted - set(ids))]:
        if pk in found:  # a node not shown is dropped; link() then drops its edges
            graph.add(_lineage_node(found[pk], focus=pk in focus))
    for hop in sorted(rows, key=lambda r: (r.distance, r.source, r.target)):
        graph.link(f"n{hop.source}", f"n{hop.target}", hop.label, indirect=bool(hop.indirect))
    return graph


def table_graph(
    table: LineageNode,
    relations: QuerySet[LineageRelation],
    depth: int = 10,
    nodes: QuerySet[LineageNode] | None = None,
) -> Graph:
    """The tables upstream and downstream of ``table``, of ``nodes`` (all when None)."""
    between_tables = relations.filter(
        src_node__container_node__isnull=True, target_node__container_node__isnull=True
    )
    return _lineage_graph(
        "table",
        f"Table lineage of {table.qualified_name}",
        [table],
        between_tables,
        depth,
        {table.pk},
        nodes,
    )


def column_graph(
    node: LineageNode,
    relations: QuerySet[LineageRelation],
    depth: int = 10,
    nodes: QuerySet[LineageNode] | None = None,
) -> Graph:
    """For a column: every column it comes from and flows into. For a table: its columns
    with their direct sources and targets. Only nodes of ``nodes`` (all when None)."""
    between_columns = relations.filter(
        src_node__container_node__isnull=False, target_node__container_node__isnull=False
    )
    if node.container_node_id:
        return _lineage_graph(
            "column",
            f"Column lineage of {node.qualified_name}",
            [node],
            between_columns,
            depth,
            {node.pk},
            nodes,
        )
    columns = list(_shown(nodes).filter(container_node=node).order_by("node_order", "id"))
    graph = _lineage_graph(
        "column",
        f"Column lineage of {node.qualified_name}",
        columns,
        between_columns,
        1,
        {c.pk for c in columns},
        nodes,
    )
    return graph
