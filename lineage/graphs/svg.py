"""A graph drawn as SVG, left to right, with the layered layout of ``lineage.graphs.layout``:
nodes as labelled boxes (links where they have one), edges as curves with arrowheads and
their labels.

Drawn at its natural size, never scaled down: the page scrolls it. Every box is as wide
as its text (``text`` measures it, erring wide); a name longer than ``TEXT_ROOM`` ends in
an ellipsis, and the node's tooltip has it whole. An edge's label goes on its curve where
it overlaps no node and no other label (``labels``), else only into the edge's tooltip,
and the drawing says how many did. The view box is the bounding box of everything drawn,
with a margin."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from lineage.graphs import text
from lineage.graphs.colours import colours
from lineage.graphs.labels import Box, place
from lineage.graphs.layout import layout
from lineage.graphs.model import MAX_NODES, Graph, GraphNode

FONT_FAMILY = "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
FONT = 12  # a node's name
SMALL = 10  # a node's second line, an edge's label
TITLE = 14
PAD = 12  # between a box's border and its text
TEXT_ROOM = 320  # the widest a node's line of text is drawn
LABEL_ROOM = 200  # the widest an edge's label is drawn
TITLE_ROOM = 960  # the widest a title is drawn (unless the graph is wider)
LABEL_HEIGHT = 13
MARGIN = 16
ARROW = 8  # how far an arrowhead or a loop reaches past its route's points
BOLD_KINDS = ("table", "step", "batch")


@dataclass
class NodeText:
    label: str
    detail: str
    width: float
    height: float


def node_text(node: GraphNode) -> NodeText:
    """The lines a node's box shows, cut to ``TEXT_ROOM``, and the size of the box."""
    bold = node.kind in BOLD_KINDS
    label = text.fit(node.label, TEXT_ROOM, FONT, bold)
    detail = text.fit(node.detail, TEXT_ROOM, SMALL) if node.detail else ""
    inner = max(text.width(label, FONT, bold), text.width(detail, SMALL), 40)
    return NodeText(label, detail, inner + 2 * PAD, 44.0 if node.detail else 30.0)


def _path(points: list[tuple[float, float]]) -> str:
    """A smooth curve through the points: horizontal tangents at each, as the layers run
    left to right (``labels.curve_point`` walks the same curve)."""
    (x0, y0), rest = points[0], points[1:]
    d = [f"M{x0:.1f},{y0:.1f}"]
    for x1, y1 in rest:
        mid = (x0 + x1) / 2
        d.append(f"C{mid:.1f},{y0:.1f} {mid:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    return " ".join(d)


@dataclass
class Drawing:
    """Where everything of a graph's SVG goes, before it is written out; in the
    coordinates of the view box."""

    width: float
    height: float
    title: str  # as drawn (maybe cut)
    title_box: Box
    nodes: dict[str, Box]
    texts: dict[str, NodeText]
    routes: dict[int, list[tuple[float, float]]]
    reversed_edges: set[int]
    labels: dict[int, tuple[str, Box]]  # edge index -> (text as drawn, box)
    hidden_labels: list[int]  # edges whose label is only in their tooltip
    notes: list[tuple[str, Box]]  # lines under the graph: cut at MAX_NODES, hidden labels


def draw(graph: Graph) -> Drawing:
    """The geometry of ``graph``'s drawing: every box, route and label, in the view box."""
    ids = list(graph.nodes)
    texts = {i: node_text(graph.nodes[i]) for i in ids}
    edges = [(e.source, e.target) for e in graph.edges]
    label_text = {
        i: text.fit(e.label, LABEL_ROOM, SMALL) for i, e in enumerate(graph.edges) if e.label
    }
    label_size = {i: (text.width(t, SMALL) + 6, float(LABEL_HEIGHT)) for i, t in label_text.items()}
    placed = layout(
        ids,
        edges,
        {i: (t.width, t.height) for i, t in texts.items()},
        {i: w for i, (w, _) in label_size.items()},
    )
    nodes = {i: Box(p.x, p.y, p.width, p.height) for i in ids for p in [placed.nodes[i]]}
    boxes = place(nodes.values(), placed.routes, label_size)
    hidden = sorted(set(label_text) - set(boxes))

    # everything drawn, to shift it clear of the title and the margin
    spans = [*nodes.values(), *boxes.values()]
    for points in placed.routes.values():
        xs, ys = [x for x, _ in points], [y for _, y in points]
        spans.append(Box(min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)).grown(ARROW))
    left = min((b.x for b in spans), default=0.0)
    top = min((b.y for b in spans), default=0.0)
    right = max((b.right for b in spans), default=0.0)
    bottom = max((b.bottom for b in spans), default=0.0)
    title_height = TITLE + 14
    dx, dy = MARGIN - left, MARGIN + title_height - top

    def moved(box: Box) -> Box:
        return Box(box.x + dx, box.y + dy, box.width, box.height)

    content_width = right - left + 2 * MARGIN
    title = text.fit(
        graph.title, max(content_width, TITLE_ROOM + 2 * MARGIN) - 2 * MARGIN, TITLE, True
    )
    title_box = Box(MARGIN, MARGIN - 4, text.width(title, TITLE, True), TITLE + 4)
    y = bottom + dy + 6
    notes = []
    for note in _notes(graph, len(hidden)):
        notes.append((note, Box(MARGIN, y, text.width(note, 11), 14)))
        y += 16
    width = max(content_width, title_box.right + MARGIN, *(b.right + MARGIN for _, b in notes))
    return Drawing(
        width=math.ceil(width),  # whole pixels, rounded out: nothing drawn is cut
        height=math.ceil(y + MARGIN - 6),
        title=title,
        title_box=title_box,
        nodes={i: moved(b) for i, b in nodes.items()},
        texts=texts,
        routes={i: [(x + dx, y + dy) for x, y in pts] for i, pts in placed.routes.items()},
        reversed_edges=placed.reversed_edges,
        labels={i: (label_text[i], moved(b)) for i, b in boxes.items()},
        hidden_labels=hidden,
        notes=notes,
    )


def _notes(graph: Graph, hidden: int) -> list[str]:
    notes = []
    if graph.truncated:
        notes.append(f"cut at {MAX_NODES} nodes")
    if hidden:
        notes.append(
            f"{hidden} edge label{'s' if hidden > 1 else ''} had no room: "
            "point at an edge to read its label"
        )
    return notes


def _edges(graph: Graph, d: Drawing) -> tuple[list[str], list[str]]:
    """Each edge as a path with its tooltip, and the boxes of the labels shown."""
    out: list[str] = []
    labels: list[str] = []
    for i, edge in enumerate(graph.edges):
        points = d.routes.get(i)
        if not points:
            continue
        end = "start" if i in d.reversed_edges else "end"
        path = _path(points)
        source, target = graph.nodes[edge.source].label, graph.nodes[edge.target].label
        how = f"{edge.label} (indirect)" if edge.indirect else edge.label
        tooltip = escape(f"{source} → {target}" + (f": {how}" if how else ""))
        dashed = ' stroke-dasharray="5 4"' if edge.indirect else ""
        hidden = " label-hidden" if i in d.hidden_labels else ""
        out += [
            f'<g class="edge-group{hidden}"><title>{tooltip}</title>',
            # an invisible wide stroke, so that a thin edge is easy to point at
            f'<path class="edge-hit" d="{path}" fill="none" stroke="transparent" '
            f'stroke-width="9" pointer-events="stroke"/>',
            f'<path class="edge" data-source="{escape(edge.source)}" '
            f'data-target="{escape(edge.target)}" d="{path}" fill="none" '
            f'stroke="#8794a1" stroke-width="1.3"{dashed} marker-{end}="url(#arrow)"/>',
            "</g>",
        ]
        if i in d.labels:
            shown, box = d.labels[i]
            labels += [
                f'<g class="edge-label-box"><title>{tooltip}</title>',
                f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.width:.1f}" '
                f'height="{box.height:.1f}" rx="3" fill="#ffffff" fill-opacity="0.9"/>',
                f'<text class="edge-label" x="{box.x + box.width / 2:.1f}" '
                f'y="{box.bottom - 3:.1f}" text-anchor="middle" font-size="{SMALL}" '
                f'fill="#52606d">{escape(shown)}</text>',
                "</g>",
            ]
    return out, labels


def _node(node_id: str, node: GraphNode, d: Drawing) -> list[str]:
    """A node as a box with its label and detail, a link where it has one."""
    p, lines = d.nodes[node_id], d.texts[node_id]
    fill, stroke = colours(node)
    width_px = 2.6 if node.focus else 1.2
    tooltip = " · ".join(filter(None, [node.label, node.detail, node.state.lower()]))
    weight = 600 if node.kind in BOLD_KINDS else 400
    group = [
        f'<g class="node {node.kind}" data-id="{escape(node_id)}" '
        f'data-state="{escape(node.state)}">',
        f"<title>{escape(tooltip)}</title>",
        f'<rect x="{p.x:.1f}" y="{p.y:.1f}" width="{p.width:.1f}" height="{p.height:.1f}" '
        f'rx="6" fill="{fill}" stroke="{stroke}" stroke-width="{width_px}"/>',
        f'<text class="node-label" x="{p.x + PAD:.1f}" y="{p.y + 19:.1f}" fill="#1f2933" '
        f'font-weight="{weight}">{escape(lines.label)}</text>',
    ]
    if lines.detail:
        group.append(
            f'<text class="node-detail" x="{p.x + PAD:.1f}" y="{p.y + 35:.1f}" '
            f'font-size="{SMALL}" fill="#52606d">{escape(lines.detail)}</text>'
        )
    group.append("</g>")
    if node.url:
        group = [f'<a href="{escape(node.url)}">', *group, "</a>"]
    return group


def to_svg(graph: Graph) -> str:
    """The graph drawn left to right: nodes as labelled boxes (links where they have one),
    edges as curves with arrowheads and their labels."""
    d = draw(graph)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{d.width:.0f}" height="{d.height:.0f}" '
        f'viewBox="0 0 {d.width:.0f} {d.height:.0f}" role="img" aria-label="{escape(graph.title)}" '
        f'font-family="{FONT_FAMILY}" font-size="{FONT}">',
        f"<title>{escape(graph.title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#6b7785"/></marker></defs>',
        f'<text class="graph-title" x="{d.title_box.x:.1f}" y="{d.title_box.bottom - 4:.1f}" '
        f'font-size="{TITLE}" font-weight="600" fill="#1f2933">'
        + (f"<title>{escape(graph.title)}</title>" if d.title != graph.title else "")
        + f"{escape(d.title)}</text>",
    ]
    edges, labels = _edges(graph, d)
    # labels over every edge (a later edge would cross an earlier label), under the nodes
    out += edges + labels
    for node_id, node in graph.nodes.items():
        out.extend(_node(node_id, node, d))
    for note, box in d.notes:
        colour = "#b42331" if note.startswith("cut") else "#52606d"
        out.append(
            f'<text class="graph-note" x="{box.x:.1f}" y="{box.bottom - 3:.1f}" '
            f'font-size="11" fill="{colour}">{escape(note)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
