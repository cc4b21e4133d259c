"""Paths as pages show them."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def file_name(path: object) -> str:
    """The last part of a path or a URI (``s3://bucket/in/events_1.tsv`` -> ``events_1.tsv``):
    the whole one is on hover."""
    return str(path).rstrip("/").rsplit("/", 1)[-1]
