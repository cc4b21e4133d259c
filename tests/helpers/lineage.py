"""Statements for the lineage parser."""

from __future__ import annotations


def deeply_nested(levels: int = 120) -> str:
    """A statement nested deeper than the parser goes (``levels`` parentheses)."""
    return "SELECT " + "(" * levels + "amount" + ")" * levels + " AS a FROM lake.orders"
