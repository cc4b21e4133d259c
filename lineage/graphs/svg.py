"""A graph drawn as SVG, left to right, with the layered layout of ``lineage.graphs.layout``:
nodes as labelled boxes (links where they have one), edges as curves with arrowheads and
their labels."""

from __future__ import annotations

from html import escape

from lineage.graphs.colours import colours
from lineage.graphs.layout import layout
from lineage.graphs.model import MAX_NODES, Graph, GraphNode

FONT = 12
CHAR = 7.0  # average advance of a 12px sans-serif character
SMALL_CHAR = 5.8
LABEL_CHARS = 44


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(node: GraphNode) -> tuple[float, float]:
    label = len(_short(node.label)) * CHAR
    detail = len(_short(node.detail)) * SMALL_CHAR if node.detail else 0
    width = max(label, detail, 40) + 24
    return width, 44.0 if node.detail else 30.0


def _path(points: list[tuple[float, float]]) -> str:
    """A smooth curve through the points: horizontal tangents at each, as the layers run
    left to right."""
    (x0, y0), rest = points[0], points[1:]
    d = [f"M{x0:.1f},{y0:.1f}"]
    for x1, y1 in rest:
        mid = (x0 + x1) / 2
        d.append(f"C{mid:.1f},{y0:.1f} {mid:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    return " ".join(d)


def to_svg(graph: Graph) -> str:
    """The graph drawn left to right: nodes as labelled boxes (links where they have one),
    edges as curves with arrowheads and their labels."""
    ids = list(graph.nodes)
    edges = [(e.source, e.target) for e in graph.edges]
    placed = layout(ids, edges, {i: _size(graph.nodes[i]) for i in ids})
    title_height = 28
    width = max(placed.width, len(graph.title) * CHAR + 32)
    height = placed.height + title_height
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(graph.title)}" '
        f'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" '
        f'font-size="{FONT}">',
        f"<title>{escape(graph.title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#6b7785"/></marker></defs>',
        f'<text x="16" y="19" font-size="14" font-weight="600" fill="#1f2933">'
        f"{escape(graph.title)}</text>",
        f'<g transform="translate(0,{title_height})">',
    ]
    for i, edge in enumerate(graph.edges):
        points = placed.routes.get(i)
        if not points:
            continue
        end = "start" if i in placed.reversed_edges else "end"
        marker = f'marker-{end}="url(#arrow)"'
        out.append(
            f'<path class="edge" data-source="{escape(edge.source)}" '
            f'data-target="{escape(edge.target)}" d="{_path(points)}" fill="none" '
            f'stroke="#8794a1" stroke-width="1.3" {marker}/>'
        )
        if edge.label:
            # on the first segment, just after the source, where edges have not merged yet
            (x0, y0), (x1, y1) = points[0], points[1]
            text = escape(_short(edge.label, 28))
            out.append(
                f'<text class="edge-label" x="{(x0 + x1) / 2:.1f}" y="{(y0 + y1) / 2 - 4:.1f}" '
                f'text-anchor="middle" font-size="10" fill="#52606d" '
                f'paint-order="stroke" stroke="#ffffff" stroke-width="3">{text}</text>'
            )
    for node_id, node in graph.nodes.items():
        p = placed.nodes[node_id]
        fill, stroke = colours(node)
        width_px = 2.6 if node.focus else 1.2
        tooltip = " · ".join(filter(None, [node.label, node.detail, node.state.lower()]))
        group = [
            f'<g class="node {node.kind}" data-id="{escape(node_id)}" '
            f'data-state="{escape(node.state)}">',
            f"<title>{escape(tooltip)}</title>",
            f'<rect x="{p.x:.1f}" y="{p.y:.1f}" width="{p.width:.1f}" height="{p.height:.1f}" '
            f'rx="6" fill="{fill}" stroke="{stroke}" stroke-width="{width_px}"/>',
            f'<text x="{p.x + 12:.1f}" y="{p.y + 19:.1f}" fill="#1f2933" '
            f'font-weight="{600 if node.kind in ("table", "step", "batch") else 400}">'
            f"{escape(_short(node.label))}</text>",
        ]
        if node.detail:
            group.append(
                f'<text x="{p.x + 12:.1f}" y="{p.y + 35:.1f}" font-size="10" fill="#52606d">'
                f"{escape(_short(node.detail))}</text>"
            )
        group.append("</g>")
        if node.url:
            group = [f'<a href="{escape(node.url)}">', *group, "</a>"]
        out.extend(group)
    if graph.truncated:
        out.append(
            f'<text x="16" y="{placed.height - 4:.0f}" font-size="11" fill="#b42331">'
            f"cut at {MAX_NODES} nodes</text>"
        )
    out.append("</g></svg>")
    return "\n".join(out)
