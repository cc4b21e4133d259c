"""The Graphviz drawing of a graph."""

from __future__ import annotations

import re

from lineage import graphs
from tests.helpers.graphs import odd_graph


def test_the_dot_escapes_quotes_and_keeps_labels():
    dot = graphs.to_dot(odd_graph())
    assert dot.startswith('digraph "Lineage of \\"a<b>\\" & c" {')
    assert '"x" -> "y" [label="CAST, \\"odd\\""];' in dot
    assert re.search(r'"y" \[label="y\\ndefault.t", .*penwidth=2.5\];', dot)
