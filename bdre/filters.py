"""Filter pieces shared by the list endpoints."""

from __future__ import annotations

from django_filters import rest_framework as filters


def date_range(field: str) -> filters.IsoDateTimeFromToRangeFilter:
    """``<name>_after`` and ``<name>_before`` (ISO 8601, inclusive) on ``field``."""
    return filters.IsoDateTimeFromToRangeFilter(
        field_name=field, help_text=f"{field} range: <name>_after and <name>_before, ISO 8601"
    )


MAX_ID = 2**63 - 1


class IdFilter(filters.NumberFilter):
    """An id: a whole number from 0 to the largest bigint. A larger one reached the database
    driver and overflowed it (a 500 on SQLite); now it is the filter's own 400."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_ID)
        kwargs.setdefault("decimal_places", 0)
        super().__init__(*args, **kwargs)
