"""The colours both drawings give a node: by its state (a run's or a batch's) when it has
one, else by its kind."""

from __future__ import annotations

from lineage.graphs.model import GraphNode

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


def colours(node: GraphNode) -> tuple[str, str]:
    if node.state in STATE_COLOURS:
        return STATE_COLOURS[node.state]
    return KIND_COLOURS.get(node.kind, ("#ffffff", "#44505c"))
