"""What the graph tests read off a graph, and a graph with every character to escape."""

from __future__ import annotations

from lineage import graphs


def labels(graph) -> set[str]:
    return {n.label for n in graph.nodes.values()}


def edge_names(graph) -> set[tuple[str, str, str]]:
    name = {
        i: f"{n.detail}.{n.label}" if n.kind == "column" else n.label
        for i, n in graph.nodes.items()
    }
    return {(name[e.source], name[e.target], e.label) for e in graph.edges}


def odd_graph() -> graphs.Graph:
    graph = graphs.Graph("table", 'Lineage of "a<b>" & c')
    graph.add(graphs.GraphNode("x", 'tbl "x" <&>', "table", url="/ui/tables/1?a=1&b=2"))
    graph.add(graphs.GraphNode("y", "y", "column", "default.t", focus=True))
    graph.link("x", "y", 'CAST, "odd"')
    return graph
