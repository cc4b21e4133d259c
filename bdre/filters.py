"""Filter pieces shared by the list endpoints."""

from __future__ import annotations

from django_filters import rest_framework as filters


def date_range(field: str) -> filters.IsoDateTimeFromToRangeFilter:
    """``<name>_after`` and ``<name>_before`` (ISO 8601, inclusive) on ``field``."""
    return filters.IsoDateTimeFromToRangeFilter(
        field_name=field, help_text=f"{field} range: <name>_after and <name>_before, ISO 8601"
    )
