"""A layered left-to-right layout (Sugiyama): break cycles, put each node one layer right of
its furthest predecessor, route long edges through dummy points, order each layer to remove
crossings (barycentre sweeps, then swaps of neighbours, keeping the best order seen), then
place nodes close to their neighbours without overlaps. The gap after a layer widens to
hold the widest label of the edges leaving it. Pure: ids and sizes in, points out."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Node = Hashable
# node -> the nodes its edges reach in the next layer (or in the previous one)
Links = Mapping[Node, list[Node]]

LAYER_GAP = 70  # horizontal space between the widest nodes of two layers
MAX_LAYER_GAP = 260  # however wide a label: a longer one is cut or goes to the tooltip
LABEL_SIDE = 24  # room for the edge on either side of a label, so that it can be seen
NODE_GAP = 18  # vertical space between two nodes of a layer
MARGIN = 16
SWEEPS = 12


@dataclass
class Placed:
    x: float  # left
    y: float  # top
    width: float
    height: float
    layer: int

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def middle(self) -> float:
        return self.y + self.height / 2


@dataclass
class Layout:
    nodes: dict[Node, Placed]
    # edge index -> the points the edge goes through, from its source's right side to its
    # target's left side (reversed edges of a cycle are drawn back to front)
    routes: dict[int, list[tuple[float, float]]]
    layers: list[list[Node]]  # real and dummy nodes, top to bottom
    width: float
    height: float
    reversed_edges: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class _Dummy:
    edge: int
    layer: int


def _acyclic(nodes: list[Node], edges: Sequence[tuple[Node, Node]]) -> set[int]:
    """The edges to reverse so that the graph has no cycle (the back edges of a DFS in the
    nodes' order, which is stable from one drawing to the next)."""
    out: dict[Node, list[tuple[int, Node]]] = defaultdict(list)
    for i, (a, b) in enumerate(edges):
        if a != b:  # a self-loop is drawn as a loop, never reversed
            out[a].append((i, b))
    state: dict[Node, int] = {}  # 1 on the stack, 2 done
    back: set[int] = set()
    for root in nodes:
        if root in state:
            continue
        stack = [(root, iter(out[root]))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            for i, child in children:
                if state.get(child) == 1:
                    back.add(i)
                elif child not in state:
                    state[child] = 1
                    stack.append((child, iter(out[child])))
                    break
            else:
                state[node] = 2
                stack.pop()
    return back


def _layers(nodes: list[Node], edges: list[tuple[Node, Node]]) -> dict[Node, int]:
    """Longest path from the sources: every edge goes at least one layer to the right."""
    preds: dict[Node, list[Node]] = defaultdict(list)
    succs: dict[Node, list[Node]] = defaultdict(list)
    for a, b in edges:
        if a != b:
            preds[b].append(a)
            succs[a].append(b)
    indegree = {n: len(preds[n]) for n in nodes}
    layer = dict.fromkeys(nodes, 0)
    ready = [n for n in nodes if indegree[n] == 0]
    while ready:
        node = ready.pop(0)
        for nxt in succs[node]:
            layer[nxt] = max(layer[nxt], layer[node] + 1)
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    # Pull sources right next to their first successor (a lone input file sits beside the
    # batch it fed, not in the first column).
    for node in nodes:
        if not preds[node] and succs[node]:
            layer[node] = min(layer[s] for s in succs[node]) - 1
    return layer


def _crossings_between(upper: list[Node], lower_pos: dict[Node, int], links: Links) -> int:
    """Crossings of the edges between two neighbouring layers: the inversions of the lower
    ends once the edges are sorted by their upper end (then lower end: edges of one node
    never cross), counted with a Fenwick tree so that hundreds of edges stay quick."""
    pairs = sorted(
        (i, lower_pos[b]) for i, a in enumerate(upper) for b in links.get(a, ()) if b in lower_pos
    )
    size = len(lower_pos) + 1
    tree = [0] * (size + 1)
    count = 0
    for seen, (_, j) in enumerate(pairs):
        # the edges seen so far whose lower end is at or above j do not cross this one
        k, not_below = j + 1, 0
        while k > 0:
            not_below += tree[k]
            k -= k & -k
        count += seen - not_below
        k = j + 1
        while k <= size:
            tree[k] += 1
            k += k & -k
    return count


def count_crossings(layers: list[list[Node]], links: Links) -> int:
    """Edge crossings between each pair of neighbouring layers."""
    total = 0
    for upper, lower in itertools.pairwise(layers):
        total += _crossings_between(upper, {n: i for i, n in enumerate(lower)}, links)
    return total


def _barycentre_sweep(
    layers: list[list[Node]], links_down: Links, links_up: Links, downward: bool
) -> None:
    indices = range(1, len(layers)) if downward else range(len(layers) - 2, -1, -1)
    for li in indices:
        fixed = layers[li - 1] if downward else layers[li + 1]
        pos = {n: i for i, n in enumerate(fixed)}
        neighbours = links_up if downward else links_down
        current = {n: i for i, n in enumerate(layers[li])}

        def key(
            node: Node,
            pos: dict[Node, int] = pos,
            neighbours: Links = neighbours,
            current: dict[Node, int] = current,
        ) -> float:
            linked = [pos[m] for m in neighbours.get(node, ()) if m in pos]
            return (sum(linked) / len(linked)) if linked else current[node]

        layers[li].sort(key=key)


def _pair_crossings(
    upper: Node, lower: Node, neighbours: list[tuple[Links, dict[Node, int]]]
) -> int:
    """Crossings between the edges of two neighbours of a layer, ``upper`` above ``lower``,
    with both neighbouring layers."""
    count = 0
    for links, pos in neighbours:
        mine = [pos[m] for m in links.get(upper, ()) if m in pos]
        theirs = [pos[m] for m in links.get(lower, ()) if m in pos]
        count += sum(1 for a in mine for b in theirs if b < a)
    return count


def _transpose(layers: list[list[Node]], links_down: Links, links_up: Links) -> None:
    """Swap neighbours of a layer while that removes crossings (only the crossings
    between the two swapped nodes' edges change)."""
    improved = True
    rounds = 0
    while improved and rounds < 8:
        improved, rounds = False, rounds + 1
        for li, layer in enumerate(layers):
            neighbours = []
            if li > 0:
                neighbours.append((links_up, {n: i for i, n in enumerate(layers[li - 1])}))
            if li + 1 < len(layers):
                neighbours.append((links_down, {n: i for i, n in enumerate(layers[li + 1])}))
            for i in range(len(layer) - 1):
                a, b = layer[i], layer[i + 1]
                if _pair_crossings(b, a, neighbours) < _pair_crossings(a, b, neighbours):
                    layer[i], layer[i + 1] = b, a
                    improved = True


def _order(layers: list[list[Node]], links_down: Links, links_up: Links) -> list[list[Node]]:
    best = [list(layer) for layer in layers]
    best_count = count_crossings(best, links_down)
    for sweep in range(SWEEPS):
        if best_count == 0:
            break
        _barycentre_sweep(layers, links_down, links_up, downward=sweep % 2 == 0)
        _transpose(layers, links_down, links_up)
        count = count_crossings(layers, links_down)
        if count < best_count:
            best, best_count = [list(layer) for layer in layers], count
    return best


def _place_vertically(
    layers: list[list[Node]], heights: Mapping[Node, float], links_down: Links, links_up: Links
) -> dict[Node, float]:
    """Tops of the nodes: each layer packed in its order, then nodes pulled towards the
    middle of their neighbours (alternately left and right) without overlapping."""
    top: dict[Node, float] = {}
    for layer in layers:
        y = 0.0
        for node in layer:
            top[node] = y
            y += heights[node] + NODE_GAP

    def pull(layer: list[Node], neighbours: Links) -> None:
        wanted: dict[Node, float] = {}
        for node in layer:
            mids = [top[m] + heights[m] / 2 for m in neighbours.get(node, ()) if m in top]
            wanted[node] = (sum(mids) / len(mids) - heights[node] / 2) if mids else top[node]
        # Pool adjacent violators: nodes that would overlap move as one block, placed at the
        # mean of what its members want; the layer's order never changes.
        # members, offsets, top, height
        blocks: list[tuple[list[Node], list[float], float, float]] = []
        for node in layer:
            members, offsets, start, size = [node], [0.0], wanted[node], heights[node]
            while blocks and blocks[-1][2] + blocks[-1][3] + NODE_GAP > start:
                above, above_offsets, _, above_size = blocks.pop()
                shift = above_size + NODE_GAP
                members = above + members
                offsets = above_offsets + [o + shift for o in offsets]
                size = shift + size
                start = sum(wanted[m] - o for m, o in zip(members, offsets, strict=True)) / len(
                    members
                )
            blocks.append((members, offsets, start, size))
        for members, offsets, start, _ in blocks:
            for m, o in zip(members, offsets, strict=True):
                top[m] = start + o

    for _ in range(4):
        for li in range(1, len(layers)):
            pull(layers[li], links_up)
        for li in range(len(layers) - 2, -1, -1):
            pull(layers[li], links_down)
    # then towards the neighbours on both sides, so that a node with many leaves on one
    # side and one parent on the other sits between them rather than by its parent
    both = {n: [*links_up.get(n, ()), *links_down.get(n, ())] for layer in layers for n in layer}
    for _ in range(2):
        for li in range(len(layers)):
            pull(layers[li], both)
    lowest = min(top.values(), default=0.0)
    return {n: y - lowest for n, y in top.items()}


def _chains(
    forward: Sequence[tuple[Node, Node]], layer_of: Mapping[Node, int]
) -> tuple[dict[int, list[Node]], dict[Node, list[Node]], dict[Node, list[Node]], dict[Node, int]]:
    """Long edges go through one dummy point per layer they cross: each edge's chain of
    points (by edge index; none for a self-loop), the links down and up between consecutive
    points, and the layer of every node and dummy point."""
    chains: dict[int, list[Node]] = {}
    links_down: dict[Node, list[Node]] = defaultdict(list)
    links_up: dict[Node, list[Node]] = defaultdict(list)
    all_layer = dict(layer_of)
    for i, (a, b) in enumerate(forward):
        if a == b:
            continue
        chain: list[Node] = [a]
        for crossed in range(layer_of[a] + 1, layer_of[b]):
            point = _Dummy(i, crossed)
            all_layer[point] = crossed
            chain.append(point)
        chain.append(b)
        chains[i] = chain
        for u, v in itertools.pairwise(chain):
            links_down[u].append(v)
            links_up[v].append(u)
    return chains, links_down, links_up, all_layer


def layout(
    nodes: Iterable[Node],
    edges: Sequence[tuple[Node, Node]],
    sizes: Mapping[Node, tuple[float, float]],
    label_widths: Mapping[int, float] | None = None,
) -> Layout:
    """Positions of ``nodes`` (of the given width and height) and routes of ``edges``;
    ``label_widths`` (edge index -> width) widen the gap after the layer an edge leaves."""
    order = list(dict.fromkeys(nodes))
    backwards = _acyclic(order, edges)
    forward = [(b, a) if i in backwards else (a, b) for i, (a, b) in enumerate(edges)]
    layer_of = _layers(order, forward)

    chains, links_down, links_up, all_layer = _chains(forward, layer_of)
    count = max(all_layer.values(), default=-1) + 1
    layers: list[list[Node]] = [[] for _ in range(count)]
    # initial order: the order of the nodes given, dummies after their source's position
    for node in order:
        layers[all_layer[node]].append(node)
    for chain in chains.values():
        for dummy in chain[1:-1]:
            layers[all_layer[dummy]].append(dummy)
    layers = _order(layers, links_down, links_up)

    heights = {n: (sizes[n][1] if not isinstance(n, _Dummy) else 2.0) for n in all_layer}
    widths = {n: (sizes[n][0] if not isinstance(n, _Dummy) else 0.0) for n in all_layer}
    tops = _place_vertically(layers, heights, links_down, links_up)
    gaps = [float(LAYER_GAP)] * count
    for i, width in (label_widths or {}).items():
        if i in chains:
            li = all_layer[chains[i][0]]
            gaps[li] = max(gaps[li], min(MAX_LAYER_GAP, width + 2 * LABEL_SIDE))
    lefts, x = [], float(MARGIN)
    for li, layer in enumerate(layers):
        lefts.append(x)
        x += max((widths[n] for n in layer), default=0.0) + gaps[li]
    placed: dict[Node, Placed] = {}
    dummy_at: dict[Node, tuple[float, float]] = {}
    for li, layer in enumerate(layers):
        column = max((widths[n] for n in layer), default=0.0)
        for node in layer:
            y = tops[node] + MARGIN
            if isinstance(node, _Dummy):
                dummy_at[node] = (lefts[li] + column / 2, y + 1)
            else:
                # centred in its column, so that edges of narrow nodes stay short
                left = lefts[li] + (column - widths[node]) / 2
                placed[node] = Placed(left, y, widths[node], heights[node], li)

    routes: dict[int, list[tuple[float, float]]] = {}
    for i, chain in chains.items():
        first, last = placed[chain[0]], placed[chain[-1]]
        points = [(first.right, first.middle)]
        points += [dummy_at[d] for d in chain[1:-1]]
        points.append((last.x, last.middle))
        routes[i] = points
    for i, (a, b) in enumerate(forward):
        if a == b:  # a self-loop: a small arc above the node
            p = placed[a]
            routes[i] = [(p.right - 10, p.y), (p.right + 12, p.y - 14), (p.right, p.y + 8)]
    width = x - gaps[-1] + MARGIN if layers else 2 * MARGIN
    height = max((p.y + p.height for p in placed.values()), default=0.0) + MARGIN
    height = max(height, max((pt[1] for pt in dummy_at.values()), default=0.0) + MARGIN)
    return Layout(placed, routes, layers, max(width, 2 * MARGIN), height, backwards)
