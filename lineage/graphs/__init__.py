"""Graphs of what BDRE knows, and their drawings. A builder reads the database and makes a
``Graph`` (``model``); a drawing turns any ``Graph`` into text. A new graph or a new drawing
is one module here (and its line below).

Builders, each from querysets the caller has already scoped to the user
(``bdre.access.scope``; for lineage, ``lineage.visibility``):
- ``column_lineage``: table-level and column-level lineage, and a column's impact list;
- ``workflow``: a job's steps, coloured by its last run;
- ``pipeline``: every job given, coloured by its last run, joined where one consumes
  another's batches;
- ``provenance``: a batch's files and the batches made from it (and the walk of the queue
  behind it).

Drawings: ``svg`` (with the layered layout of ``layout``, text measured by ``text`` and edge
labels placed by ``labels``) and ``dot`` (Graphviz), coloured alike by ``colours``."""

from lineage.graphs.column_lineage import Impact, column_graph, impact, table_graph
from lineage.graphs.dot import to_dot
from lineage.graphs.model import MAX_NODES, Graph, GraphEdge, GraphNode
from lineage.graphs.pipeline import pipeline_graph
from lineage.graphs.provenance import FILES_PER_BATCH, provenance_graph
from lineage.graphs.svg import to_svg
from lineage.graphs.workflow import workflow_graph

__all__ = [
    "FILES_PER_BATCH",
    "MAX_NODES",
    "Graph",
    "GraphEdge",
    "GraphNode",
    "Impact",
    "column_graph",
    "impact",
    "pipeline_graph",
    "provenance_graph",
    "table_graph",
    "to_dot",
    "to_svg",
    "workflow_graph",
]
