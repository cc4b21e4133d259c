"""What a step run counts (``InstanceExec.counters``), said in words: each counter's label, the
rows a run set aside (bad, duplicates dropped, quarantined), and how a run's numbers add up.
The run page and the dashboard say them from here, and nowhere else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LABELS = {
    "files": "files read",
    "rows_in": "rows read",
    "rows_out": "rows written",
    "bad_rows": "bad rows, set aside with their reason",
    "dup_in_batch_natural": "duplicates within the batch (the same event twice), dropped",
    "dup_cross_batch_natural": "duplicates of events an earlier batch delivered, dropped",
    "dup_in_batch_synthetic": "events sharing an id with another of the batch, kept with a new id",
    "dup_cross_batch_synthetic": "events reusing an earlier batch's id, kept with a new id",
    "entities_out": "context entities written",
    "bad_entities": "context entities that could not be read, kept with their reason",
    "tables": "tables written",
    "tables_read": "tables read",
}
# Rows a run took out of what it read: with the rows it wrote, they make up the rows it read.
# (Rows a drop expectation moves to a quarantine table are in the run's expectations, rule
# by rule: docs/quality.md.)
SET_ASIDE = {
    "bad_rows": "bad",
    "dup_in_batch_natural": "duplicates",
    "dup_cross_batch_natural": "duplicates",
}


@dataclass(frozen=True)
class Counter:
    key: str
    label: str
    value: Any


def labelled(counters: Mapping[str, Any]) -> list[Counter]:
    """The run's counters in the order of :data:`LABELS`, then any other a step kind added
    (a callable's own), under its own name."""
    known = [Counter(k, label, counters[k]) for k, label in LABELS.items() if k in counters]
    return known + [
        Counter(k, k.replace("_", " "), v) for k, v in sorted(counters.items()) if k not in LABELS
    ]


# A cleanse's bad rows are rows that broke its rules: invalid, in its invalid table.
INVALID_KINDS = {"spark.cleanse"}


def set_aside(counters: Mapping[str, Any], *, kind: str = "") -> dict[str, int]:
    """The rows the run set aside, by why: bad (invalid, for a cleanse), duplicates
    (dropped)."""
    found: dict[str, int] = {}
    for key, why in SET_ASIDE.items():
        value = counters.get(key)
        if isinstance(value, int) and value:
            why = "invalid" if why == "bad" and kind in INVALID_KINDS else why
            found[why] = found.get(why, 0) + value
    return found


def how_they_add_up(counters: Mapping[str, Any]) -> str:
    """A sentence on how the rows read became the rows written, when the run counted both;
    a run whose numbers do not add up says so (a row lost or made up on the way)."""
    rows_in, rows_out = counters.get("rows_in"), counters.get("rows_out")
    if not isinstance(rows_in, int) or not isinstance(rows_out, int):
        return ""
    parts = [f"{rows_out:,} written"]
    aside = {k: counters[k] for k in SET_ASIDE if isinstance(counters.get(k), int)}
    duplicates = aside.get("dup_in_batch_natural", 0) + aside.get("dup_cross_batch_natural", 0)
    if "bad_rows" in aside:
        parts.append(f"{aside['bad_rows']:,} bad")
    if "dup_in_batch_natural" in aside or "dup_cross_batch_natural" in aside:
        parts.append(
            f"{duplicates:,} duplicates dropped ({aside.get('dup_in_batch_natural', 0):,} within "
            f"the batch, {aside.get('dup_cross_batch_natural', 0):,} already delivered before)"
        )
    total = rows_out + sum(aside.values())
    sentence = f"{rows_in:,} rows read = " + " + ".join(parts) + "."
    if total != rows_in:
        sentence += f" These add up to {total:,}, not {rows_in:,}: rows were lost or added."
    synthetic = [
        n
        for n in (counters.get("dup_in_batch_synthetic"), counters.get("dup_cross_batch_synthetic"))
        if isinstance(n, int)
    ]
    if any(synthetic):
        sentence += (
            f" {sum(synthetic):,} written events had an id another event had, and were given"
            " a new one (they are different events, so they are kept)."
        )
    return sentence
