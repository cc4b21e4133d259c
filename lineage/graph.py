"""Graphs of what BDRE knows, and their drawings: table-level and column-level lineage, a
job's workflow of steps coloured by its last run, a batch's provenance. Builders read the
database through querysets the caller has already scoped to the user (``bdre.access.scope``;
for lineage, ``lineage.visibility``: a node not in the ``nodes`` given is dropped, with its
edges);
``to_svg`` draws with the layered layout of ``lineage.layout``, ``to_dot`` writes Graphviz."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from html import escape
from pathlib import PurePosixPath
from typing import Any

from django.db.models import QuerySet

from batches.models import Batch
from lineage.extract import edge_functions
from lineage.layout import layout
from lineage.models import LineageNode, LineageRelation
from lineage.provenance import BOTH, trace
from processes.models import ExecState, InstanceExec, Process
from processes.workflow import NextLinks, steps_in_order

MAX_NODES = 400  # beyond this a drawing is unreadable; the graph says it was cut
FILES_PER_BATCH = 12

FONT = 12
CHAR = 7.0  # average advance of a 12px sans-serif character
SMALL_CHAR = 5.8
LABEL_CHARS = 44

STATE_COLOURS = {
    "SUCCESS": ("#d1f0dc", "#1e7b44"),
    "RUNNING": ("#d6e6ff", "#1d5fbf"),
    "STARTED": ("#d6e6ff", "#1d5fbf"),
    "FAILED": ("#fbd9dc", "#b42331"),
    "KILLED": ("#fbd9dc", "#b42331"),
    "SUSPENDED": ("#fff1c7", "#9a6b00"),
    "PAUSED": ("#fff1c7", "#9a6b00"),
    "NOT_RUNNING": ("#eceff2", "#5b6570"),
    "SKIPPED": ("#f4f5f7", "#8a939c"),
    "NOT RUN": ("#ffffff", "#8a939c"),
}
KIND_COLOURS = {
    "table": ("#e8f1fb", "#2f5f8f"),
    "column": ("#ffffff", "#2f5f8f"),
    "job": ("#f3eefc", "#5a3d99"),
    "file": ("#f7f7f2", "#6b6b52"),
    "more": ("#ffffff", "#8a939c"),
}


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

    def link(self, source: str, target: str, label: str = "") -> None:
        if source not in self.nodes or target not in self.nodes:
            return
        edge = self._between.get((source, target))
        if edge is None:
            edge = self._between[(source, target)] = GraphEdge(source, target, label)
            self.edges.append(edge)
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


# --- lineage ---------------------------------------------------------------------------------


def _lineage_node(node: LineageNode, focus: bool = False) -> GraphNode:
    if node.container_node_id:
        table = node.qualified_name.rsplit(".", 1)[0]
        return GraphNode(
            f"n{node.pk}", node.display_name, "column", table, ref=node.pk, focus=focus
        )
    return GraphNode(f"n{node.pk}", node.qualified_name, "table", ref=node.pk, focus=focus)


def _walk_relations(
    start: list[int], relations: QuerySet[LineageRelation], *, upstream: bool, depth: int
) -> list[tuple[int, int, list[str], int]]:
    """(source, target, functions, distance) of the relations reached from ``start`` in one
    direction, one query per level; the functions of every query's edge between the same
    two nodes together."""
    found: dict[tuple[int, int], tuple[list[str], int]] = {}
    seen, frontier = set(start), list(start)
    for level in range(1, depth + 1):
        if not frontier:
            break
        key = "target_node_id__in" if upstream else "src_node_id__in"
        rows = relations.filter(**{key: frontier}).values_list(
            "src_node_id", "target_node_id", "dot_string"
        )
        nxt = []
        for src, dst, dot in rows:
            functions, _ = found.setdefault((src, dst), ([], level))
            functions += [f for f in edge_functions(dot) if f not in functions]
            reached = src if upstream else dst
            if reached not in seen:
                seen.add(reached)
                nxt.append(reached)
        frontier = nxt
    return [(s, t, functions, d) for (s, t), (functions, d) in found.items()]


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
    for src, dst, functions, distance in rows:
        reached = src if upstream else dst
        old = best.get(reached, (distance, set()))
        best[reached] = (min(old[0], distance), old[1] | set(functions))
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
    relations,
    depth: int,
    focus: set[int],
    nodes: QuerySet[LineageNode] | None,
) -> Graph:
    graph = Graph(kind, title)
    ids = [n.pk for n in start]
    rows = _walk_relations(ids, relations, upstream=True, depth=depth)
    rows += _walk_relations(ids, relations, upstream=False, depth=depth)
    wanted = set(ids) | {r[0] for r in rows} | {r[1] for r in rows}
    found = _shown(nodes).in_bulk(list(wanted))
    for pk in [*ids, *sorted(wanted - set(ids))]:
        if pk in found:  # a node not shown is dropped; link() then drops its edges
            graph.add(_lineage_node(found[pk], focus=pk in focus))
    for src, dst, functions, _ in sorted(rows, key=lambda r: (r[3], r[0], r[1])):
        graph.link(f"n{src}", f"n{dst}", ", ".join(functions))
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


# --- workflow --------------------------------------------------------------------------------


def _duration(run: InstanceExec) -> str:
    if not run.end_ts:
        return "running" if run.exec_state_id == ExecState.RUNNING else ""
    seconds = (run.end_ts - run.start_ts).total_seconds()
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def workflow_graph(job: Process) -> Graph:
    """A job's steps in their workflow, coloured by the state of each step in the job's last
    run, with the upstream jobs whose batches its steps consume."""
    graph = Graph("process", f"Workflow of {job.name}")
    last = InstanceExec.objects.filter(process=job, parent__isnull=True).order_by("-id").first()
    step_runs: dict[int, InstanceExec] = {}
    skipped: set[int] = set()
    if last is not None:
        for run in InstanceExec.objects.filter(parent=last).order_by("id"):
            step_runs[run.process_id] = run  # the latest attempt of each step
        skipped = set(last.plan.get("skipped", []))
    steps = steps_in_order(job)
    for step in steps:
        run = step_runs.get(step.pk)
        if run is not None:
            state = ExecState(run.exec_state_id).name
            detail = " · ".join(filter(None, [step.process_type.job_kind, _duration(run)]))
        else:
            state = "SKIPPED" if step.pk in skipped else "NOT RUN"
            detail = step.process_type.job_kind
        graph.add(
            GraphNode(f"p{step.pk}", step.name, "step", detail, state, ref=step.pk, focus=False)
        )
    ids = [s.pk for s in steps]
    for src, dst in NextLinks.objects.filter(
        from_process_id__in=ids, to_process_id__in=ids
    ).values_list("from_process_id", "to_process_id"):
        graph.link(f"p{src}", f"p{dst}")
    upstream = Process.enqueuing_processes.through.objects.filter(
        from_process_id__in=ids, to_process__deleted=False
    ).values_list("from_process_id", "to_process_id", "to_process__name")
    for step_id, job_id, name in upstream:
        graph.add(GraphNode(f"p{job_id}", name, "job", "upstream job", ref=job_id))
        graph.link(f"p{job_id}", f"p{step_id}", "batches")
    return graph


# --- provenance ------------------------------------------------------------------------------


def provenance_graph(
    batch_id: int, direction: str = BOTH, visible: QuerySet[Batch] | None = None
) -> Graph:
    """The batches and files upstream and downstream of a batch: files into the batch they
    were registered in, then a batch into the batch of each job run that consumed it. Only
    batches in ``visible`` (the user's teams') are drawn."""
    found = trace(batch_id, direction)
    graph = Graph("batch", f"Provenance of batch {batch_id}")
    shown = visible if visible is not None else Batch.objects.all()
    # a batch is coloured by the state of the run that produced it
    states = dict(
        shown.filter(pk__in=list(found.batches)).values_list(
            "pk", "source_instance_exec__exec_state_id"
        )
    )
    for bid in sorted(states):
        info, state = found.batches[bid], states[bid]
        graph.add(
            GraphNode(
                f"b{bid}",
                f"batch {bid}",
                "batch",
                info.job or f"{len(info.files)} file(s) registered",
                ExecState(state).name if state else "",
                ref=bid,
                focus=bid == batch_id,
            )
        )
    for bid in sorted(states):
        files = found.batches[bid].files
        for file_id, path in files[:FILES_PER_BATCH]:
            name = PurePosixPath(path).name or path
            graph.add(GraphNode(f"f{file_id}", name, "file", path, ref=file_id))
            graph.link(f"f{file_id}", f"b{bid}")
        if len(files) > FILES_PER_BATCH:
            more = f"more{bid}"
            graph.add(GraphNode(more, f"{len(files) - FILES_PER_BATCH} more files", "more"))
            graph.link(more, f"b{bid}")
    for hop in found.hops:
        graph.link(f"b{hop.source}", f"b{hop.target}", hop.step)
    return graph


# --- drawing ---------------------------------------------------------------------------------


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(node: GraphNode) -> tuple[float, float]:
    label = len(_short(node.label)) * CHAR
    detail = len(_short(node.detail)) * SMALL_CHAR if node.detail else 0
    width = max(label, detail, 40) + 24
    return width, 44.0 if node.detail else 30.0


def _colours(node: GraphNode) -> tuple[str, str]:
    if node.state in STATE_COLOURS:
        return STATE_COLOURS[node.state]
    return KIND_COLOURS.get(node.kind, ("#ffffff", "#44505c"))


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
        fill, stroke = _colours(node)
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
        fill, stroke = _colours(node)
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
        label = f" [label={_dot_id(edge.label)}]" if edge.label else ""
        lines.append(f"  {_dot_id(edge.source)} -> {_dot_id(edge.target)}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"
