"""Where the labels of edges go: on the edge's own curve, at the first of a few points along
it (the middle of a segment first) where the label overlaps neither a node nor a label
already placed; failing that, just above or below the curve at one of those points. A
label with no such point is not drawn; the drawing keeps it in the edge's tooltip. Pure
geometry: boxes and curves in, label boxes out."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Point = tuple[float, float]

# where along a segment a label is tried, the middle first
STOPS = (0.5, 0.35, 0.65, 0.2, 0.8, 0.42, 0.58, 0.27, 0.73, 0.12, 0.88)
# blank space kept around a label: from another label, so that two never read as one,
# and (with NODE_CLEARANCE more) from a node's border
LABEL_CLEARANCE = 3.0
NODE_CLEARANCE = 2.0
CELL = 64.0  # side of the squares of the grid that finds what is near a box


@dataclass(frozen=True)
class Box:
    x: float  # left
    y: float  # top
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height

    def grown(self, by: float) -> Box:
        return Box(self.x - by, self.y - by, self.width + 2 * by, self.height + 2 * by)

    def intersects(self, other: Box) -> bool:
        return (
            self.x < other.right
            and other.x < self.right
            and self.y < other.bottom
            and other.y < self.bottom
        )

    def contains(self, other: Box) -> bool:
        return (
            self.x <= other.x
            and self.y <= other.y
            and other.right <= self.right
            and other.bottom <= self.bottom
        )


def curve_point(a: Point, b: Point, t: float) -> Point:
    """The point at ``t`` of the curve ``svg`` draws from ``a`` to ``b``: a cubic Bézier
    with both control points half way across, at the height of its own end."""
    (x0, y0), (x1, y1) = a, b
    mid = (x0 + x1) / 2
    u = 1 - t
    x = u**3 * x0 + 3 * u * u * t * mid + 3 * u * t * t * mid + t**3 * x1
    y = u**3 * y0 + 3 * u * u * t * y0 + 3 * u * t * t * y1 + t**3 * y1
    return x, y


class _Grid:
    """Boxes bucketed by the squares they cover, to test a box against its neighbours only."""

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], list[Box]] = defaultdict(list)

    @staticmethod
    def _squares(box: Box) -> Iterable[tuple[int, int]]:
        for cx in range(int(box.x // CELL), int(box.right // CELL) + 1):
            for cy in range(int(box.y // CELL), int(box.bottom // CELL) + 1):
                yield cx, cy

    def add(self, box: Box) -> None:
        for square in self._squares(box):
            self.cells[square].append(box)

    def hits(self, box: Box) -> bool:
        return any(
            box.intersects(other) for square in self._squares(box) for other in self.cells[square]
        )


def candidates(route: Sequence[Point]) -> list[Point]:
    """Points of an edge's route where its label may go, best first: along every segment,
    the middle of each before the points nearer its ends."""
    segments = list(itertools.pairwise(route))
    return [curve_point(a, b, t) for t in STOPS for a, b in segments]


def place(
    nodes: Iterable[Box],
    routes: Mapping[int, Sequence[Point]],
    sizes: Mapping[int, tuple[float, float]],
) -> dict[int, Box]:
    """The box of each edge's label (edge index -> box) that could be placed on its route
    without overlapping a node or another label; edges in ``sizes`` order, missing ones
    had no room."""
    grid = _Grid()
    for node in nodes:
        grid.add(node.grown(NODE_CLEARANCE))
    placed: dict[int, Box] = {}
    for edge, (width, height) in sizes.items():
        route = routes.get(edge)
        if not route or len(route) < 2:
            continue
        box = _free(candidates(route), width, height, grid)
        if box is not None:
            placed[edge] = box
            grid.add(box)
    return placed


def _free(points: list[Point], width: float, height: float, grid: _Grid) -> Box | None:
    """The first box at one of ``points`` that overlaps nothing: centred on the curve,
    else resting on it, else hanging from it (touching it still)."""
    for shift in (0.0, -height / 2, height / 2):
        for x, y in points:
            box = Box(x - width / 2, y - height / 2 + shift, width, height)
            if box.x >= 0 and box.y >= 0 and not grid.hits(box.grown(LABEL_CLEARANCE)):
                return box
    return None
