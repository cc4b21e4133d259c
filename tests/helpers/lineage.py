"""Statements for the lineage parser."""

from __future__ import annotations


def deeply_nested(levels: int = 120) -> str:
    """A statement nested deeper than the parser goes (``levels`` parentheses)."""
    return "SELECT " + "(" * levels + "amount" + ")" * levels + " AS a FROM lake.orders"


def column_edges(query, target: str | None = None) -> set[tuple[str, str, tuple]]:
    """(source, target, labels) of a recorded query's column edges (into the table
    ``target``)."""
    from lineage.extract import edge_functions

    relations = query.relations.filter(target_node__container_node__isnull=False)
    if target is not None:
        relations = relations.filter(target_node__container_node__qualified_name=target)
    return {
        (
            r.src_node.qualified_name,
            r.target_node.qualified_name,
            tuple(edge_functions(r.dot_string)),
        )
        for r in relations.select_related("src_node", "target_node")
    }


def query_of(step: str):
    """The lineage query the last run of the step named ``step`` recorded."""
    from lineage.models import LineageQuery

    return LineageQuery.objects.filter(process__name=step).latest("id")
