"""Batch markings: a comma list of ``label@YYYY-MM-DD`` elements or plain dates.

Min and max compare the part after the last ``@`` and give that date alone, as BDRE's
InitJob did (``min-batch-marking-map.125=2014-12-16``); a union keeps each element, label
and all, once, ordered.

A day is closed by ``EOD@<day>`` on the last batch of that day (a step's cut pattern
``EOD`` then claims the day whole): a job whose ``run.close_days`` is ``on_later_day``
closes every day before the first day of a batch it queues (batches.queue.close_days).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
END_OF_DAY = "EOD"
CLOSE_ON_LATER_DAY = "on_later_day"


def end_of_day(day: str) -> str:
    return f"{END_OF_DAY}@{day}"


def is_day(text: str) -> bool:
    return DAY.fullmatch(text) is not None


def days(marking: str | None) -> list[str]:
    """The marking's elements that are days (``YYYY-MM-DD``), labels and all else left out."""
    return [e for e in elements(marking) if is_day(e)]


def has_label(marking: str | None, label: str) -> bool:
    """Whether an element of the marking carries ``label`` (``EOD`` in ``EOD@2026-11-20``),
    in any case."""
    wanted = label.strip().lower()
    return any(e.rpartition("@")[0].lower() == wanted for e in elements(marking) if "@" in e)


def closes_a_day(marking: str | None, day: str | None = None) -> bool:
    """Whether the marking closes ``day`` (any day, without one)."""
    closing = [e for e in elements(marking) if e.startswith(END_OF_DAY + "@")]
    return bool(closing) if day is None else end_of_day(day) in closing


def elements(marking: str | None) -> list[str]:
    if not marking:
        return []
    return [part.strip() for part in marking.split(",") if part.strip()]


def sort_key(element: str) -> tuple[str, str]:
    return (date_of(element), element)


def _all(markings: Iterable[str | None]) -> list[str]:
    return [e for marking in markings for e in elements(marking)]


def date_of(element: str) -> str:
    return element.rsplit("@", 1)[-1]


def min_date(markings: Iterable[str | None]) -> str | None:
    found = _all(markings)
    return date_of(min(found, key=sort_key)) if found else None


def max_date(markings: Iterable[str | None]) -> str | None:
    found = _all(markings)
    return date_of(max(found, key=sort_key)) if found else None


def union(markings: Iterable[str | None]) -> str:
    return ",".join(sorted(set(_all(markings)), key=sort_key))
