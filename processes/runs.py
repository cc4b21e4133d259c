"""What the runs list shows beside a run's own columns: its duration, the input batches it
claimed and the rows its steps read and wrote; and a job's duration trend."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Count
from django.utils import timezone

from batches.models import ArchiveConsumpQueue, BatchConsumpQueue
from processes.models import InstanceExec

TREND_RUNS = 30


def _set(run: InstanceExec, **values: float | None) -> None:
    """Values on a run for its page and serializer, as a queryset's ``annotate`` sets them."""
    for name, value in values.items():
        setattr(run, name, value)


def _total(counters: Iterable[Any], key: str) -> int | None:
    """The sum of ``key`` over the counters that have it as a whole number, or None if none
    has: counters are free-form (a Python callable returns its own), so a text or a
    fraction there is left out rather than failing the list."""
    values = [
        c[key]
        for c in counters
        if isinstance(c, dict) and isinstance(c.get(key), int) and not isinstance(c[key], bool)
    ]
    return sum(values) if values else None


def attach_totals(runs: Sequence[InstanceExec], now: datetime | None = None) -> None:
    """Set ``duration_seconds``, ``batches_in``, ``rows_in`` and ``rows_out`` on each run,
    in three queries whatever the number of runs.

    A job run's input batches are the distinct source batches of the queue and archive
    rows claimed into its target batch (a retry reuses that batch and its rows, so it shows
    the same ones); its rows are the sums over its step runs. A step run has its own
    counters' rows and no input batches of its own (None)."""
    now = now or timezone.now()
    job_runs = [r for r in runs if r.parent_id is None]
    targets = {r.target_batch_id for r in job_runs if r.target_batch_id}
    batches_in: Counter[int] = Counter()
    if targets:
        # Distinct per table: a row is in the queue or, once processed, in the archive.
        for model in (BatchConsumpQueue, ArchiveConsumpQueue):
            found = (
                model.objects.filter(target_batch_id__in=targets)
                .values("target_batch_id")
                .annotate(n=Count("source_batch_id", distinct=True))
                .values_list("target_batch_id", "n")
            )
            for target, n in found:
                batches_in[target] += n
    step_counters: dict[int, list[Any]] = defaultdict(list)
    if job_runs:
        for parent_id, counters in InstanceExec.objects.filter(
            parent_id__in=[r.pk for r in job_runs]
        ).values_list("parent_id", "counters"):
            step_counters[parent_id].append(counters)
    for run in runs:
        is_job = run.parent_id is None
        counters = step_counters[run.pk] if is_job else [run.counters]
        values = {
            "duration_seconds": round(((run.end_ts or now) - run.start_ts).total_seconds(), 3),
            "batches_in": batches_in[run.target_batch_id] if is_job and run.target_batch_id else 0,
            "rows_in": _total(counters, "rows_in"),
            "rows_out": _total(counters, "rows_out"),
        }
        if not is_job:
            values["batches_in"] = None
        _set(run, **values)


def trend(job_id: int, last: int = TREND_RUNS, now: datetime | None = None) -> list[InstanceExec]:
    """The job's last ``last`` runs, oldest first, each with ``duration_seconds`` (a running
    one's so far)."""
    now = now or timezone.now()
    runs = list(
        InstanceExec.objects.filter(process_id=job_id, parent__isnull=True)
        .select_related("exec_state")
        .order_by("-id")[:last]
    )
    runs.reverse()
    for run in runs:
        _set(run, duration_seconds=((run.end_ts or now) - run.start_ts).total_seconds())
    return runs
