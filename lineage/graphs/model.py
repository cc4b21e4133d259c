"""The graph every builder makes and every drawing draws: nodes (a table, a column, a step, a
batch, a file...) and the edges between them, kept in the order they were added. A graph
holds at most ``MAX_NODES`` nodes and says when it was cut."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MAX_NODES = 400  # beyond this a drawing is unreadable; the graph says it was cut


@dataclass
class GraphNode:
    id: str
    label: str
    kind: str  # table, column, step, job, batch, file, more
    detail: str = ""  # a second line: the table of a column, a step's kind, a batch's job
    state: str = ""  # colours the node: a run or batch state
    ref: int | None = None  # the id of the record behind it
    focus: bool = False  # the node the graph was asked for
    url: str = ""


@dataclass
class GraphEdge:
    source: str
    target: str
    label: str = ""
    # the source decides the target's rows (a filter, a join, a group-by), not its value
    indirect: bool = False


@dataclass
class Graph:
    kind: str
    title: str
    nodes: dict[str, GraphNode] = field(default_factory=dict)
    edges: list[GraphEdge] = field(default_factory=list)
    truncated: bool = False
    _between: dict[tuple[str, str], GraphEdge] = field(default_factory=dict, repr=False)

    def add(self, node: GraphNode) -> GraphNode:
        if node.id not in self.nodes:
            if len(self.nodes) >= MAX_NODES:
                self.truncated = True
                return node
            self.nodes[node.id] = node
        return self.nodes[node.id]

    def link(self, source: str, target: str, label: str = "", *, indirect: bool = False) -> None:
        if source not in self.nodes or target not in self.nodes:
            return
        edge = self._between.get((source, target))
        if edge is None:
            edge = self._between[(source, target)] = GraphEdge(source, target, label, indirect)
            self.edges.append(edge)
        elif edge.indirect != indirect:  # a direct dependency wins
            if not indirect:
                edge.label, edge.indirect = label, False
        elif label and label not in edge.label.split(", "):
            edge.label = ", ".join(filter(None, [edge.label, label]))

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "truncated": self.truncated,
            "nodes": [asdict(n) for n in self.nodes.values()],
            "edges": [asdict(e) for e in self.edges],
        }
