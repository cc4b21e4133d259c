"""A graph written as Graphviz source: ``dot -Tsvg`` draws the same graph."""

from __future__ import annotations

from lineage.graphs.colours import colours
from lineage.graphs.model import Graph


def _dot_id(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph: Graph) -> str:
    """Graphviz source: ``dot -Tsvg`` draws the same graph."""
    lines = [
        f"digraph {_dot_id(graph.title)} {{",
        "  rankdir=LR;",
        f"  label={_dot_id(graph.title)}; labelloc=t;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
        '  edge [color="#8794a1", fontname="Helvetica", fontsize=9];',
    ]
    for node_id, node in graph.nodes.items():
        fill, stroke = colours(node)
        label = node.label + (f"\n{node.detail}" if node.detail else "")
        attrs = [
            f"label={_dot_id(label)}",
            f'fillcolor="{fill}"',
            f'color="{stroke}"',
        ]
        if node.focus:
            attrs.append("penwidth=2.5")
        if node.url:
            attrs.append(f"URL={_dot_id(node.url)}")
        lines.append(f"  {_dot_id(node_id)} [{', '.join(attrs)}];")
    for edge in graph.edges:
        attributes = [f"label={_dot_id(edge.label)}"] if edge.label else []
        attributes += ["style=dashed"] if edge.indirect else []
        label = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"  {_dot_id(edge.source)} -> {_dot_id(edge.target)}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"
