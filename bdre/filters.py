"""Filter pieces shared by the list endpoints."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import ForeignObjectRel
from django_filters import fields
from django_filters import rest_framework as filters


class UtcIsoDateTimeField(fields.IsoDateTimeField):
    """An ISO 8601 time, turned to UTC: ISO 8601 allows an offset up to 23:59, PostgreSQL
    refuses any past 15:59 (a DataError that broke the request's transaction)."""

    def to_python(self, value: Any) -> datetime | None:
        moment: datetime | None = super().to_python(value)
        if moment is None:
            return None
        try:
            return moment.astimezone(UTC)
        except OverflowError as exc:  # 0001-01-01T00:00+01:00 is in year 0 in UTC
            raise ValidationError("A time from year 1 to 9999 (in UTC).", code="invalid") from exc


class UtcIsoDateTimeRangeField(fields.RangeField):
    widget = fields.DateRangeWidget

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__((UtcIsoDateTimeField(), UtcIsoDateTimeField()), *args, **kwargs)


class DateRangeFilter(filters.IsoDateTimeFromToRangeFilter):
    field_class = UtcIsoDateTimeRangeField


class UtcDayRangeField(fields.DateRangeField):
    """Whole days of the current time zone, as UTC times: a first or last day of the calendar
    falls outside years 1 to 9999 in UTC east or west of it (an OverflowError on the query)."""

    def compress(self, data_list: list[Any]) -> slice | None:
        days: slice | None = super().compress(data_list)
        if days is None:
            return None
        try:
            start, stop = (
                None if m is None else m.astimezone(UTC) for m in (days.start, days.stop)
            )
        except OverflowError as exc:
            raise ValidationError("A day from year 1 to 9999 (in UTC).", code="invalid") from exc
        return slice(start, stop)


class DayRangeFilter(filters.DateFromToRangeFilter):
    """``<name>_after`` and ``<name>_before`` as dates, each day whole (to its last moment)."""

    field_class = UtcDayRangeField


def date_range(field: str) -> DateRangeFilter:
    """``<name>_after`` and ``<name>_before`` (ISO 8601, inclusive) on ``field``."""
    return DateRangeFilter(
        field_name=field, help_text=f"{field} range: <name>_after and <name>_before, ISO 8601"
    )


MAX_ID = 2**63 - 1


class IdFilter(filters.NumberFilter):
    """An id: a whole number from 0 to the largest bigint. A larger one reached the database
    driver and overflowed it (a 500 on SQLite); now it is the filter's own 400."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_ID)
        kwargs.setdefault("decimal_places", 0)
        super().__init__(*args, **kwargs)


class FilterSet(filters.FilterSet):
    """A FilterSet whose relation filters take a plain id and match it against the rows the
    list already shows (each list is scoped first). django-filter's own model choice filter
    looks the id up among all rows of every team and answers 400 for an id of no row but
    an empty list for an id of another team's row, which tells whether that row exists."""

    @classmethod
    def filter_for_lookup(
        cls, field: models.Field[Any, Any] | ForeignObjectRel, lookup_type: str
    ) -> tuple[type[Any] | None, dict[str, Any]]:
        target = getattr(field, "target_field", None)
        if (
            field.is_relation
            and not field.many_to_many
            and lookup_type == "exact"
            and isinstance(target, (models.AutoField, models.BigAutoField, models.IntegerField))
        ):
            return IdFilter, {}
        found: tuple[type[Any] | None, dict[str, Any]] = super().filter_for_lookup(
            field, lookup_type
        )
        return found


class FilterBackend(filters.DjangoFilterBackend):
    """DRF's filter backend with :class:`FilterSet` for the lists' ``filterset_fields``."""

    filterset_base = FilterSet
