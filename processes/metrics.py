"""The registry's numbers for ``/metrics`` (bdre/metrics.py serves them; docs/operations.md,
"Metrics, JSON logs and Flower").

Observed where a step run ends, in the process that ended it (a worker, or the web for a
halt-step through the API), into prometheus-client's multi-process files:

- ``bdre_step_run_duration_seconds`` (histogram): start to end of each step run, by its
  state (success, failed);
- ``bdre_expectation_failures_total`` and ``bdre_expectation_failed_rows_total``: the step
  runs in which an expectation failed rows, and those rows, by table, rule and action;
- ``bdre_shred_events_read_total``, ``bdre_shred_events_written_total``,
  ``bdre_shred_bad_rows_total`` and ``bdre_shred_duplicates_total`` (by strategy): the
  counters a successful ``spark.shred`` run stored.

Counted from the database at each scrape (:class:`RegistryCollector`):

- ``bdre_runs``: job runs by job and state;
- ``bdre_scan_last_run_age_seconds`` and ``bdre_scan_last_new_file_age_seconds``: how long
  ago each ``ingest.scan`` step last listed its location, and last registered a new file.

Labels name the team, the job and the step, never a run: one series per step, however many
runs there are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from batches.models import ScanState
from processes import events
from processes.models import ExecState, InstanceExec, Process
from processes.step_kinds import expectations

log = logging.getLogger(__name__)

STEP_LABELS = ["team", "job_name", "step_name"]
# From a second (a python.callable) to hours (a backfill's Spark step).
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800)

STEP_DURATION = Histogram(
    "bdre_step_run_duration_seconds",
    "Duration of step runs, start to end, by the state they ended in",
    [*STEP_LABELS, "kind", "state"],
    buckets=DURATION_BUCKETS,
)
SHRED_READ = Counter(
    "bdre_shred_events_read",
    "Enriched event lines read by successful spark.shred runs",
    STEP_LABELS,
)
SHRED_WRITTEN = Counter(
    "bdre_shred_events_written",
    "Atomic events written by successful spark.shred runs (duplicates and bad rows excluded)",
    STEP_LABELS,
)
SHRED_BAD = Counter(
    "bdre_shred_bad_rows",
    "Lines successful spark.shred runs could not read, written to the bad rows",
    STEP_LABELS,
)
SHRED_DUPLICATES = Counter(
    "bdre_shred_duplicates",
    "Duplicates found by successful spark.shred runs, by deduplication strategy",
    [*STEP_LABELS, "strategy"],
)
DUPLICATE_PREFIX = "dup_"
CHECK_LABELS = [*STEP_LABELS, "table", "rule", "action"]
CHECK_FAILURES = Counter(
    "bdre_expectation_failures",
    "Step runs in which an expectation failed rows (docs/quality.md), by rule",
    CHECK_LABELS,
)
CHECK_FAILED_ROWS = Counter(
    "bdre_expectation_failed_rows",
    "Rows that failed an expectation (warned, dropped to the quarantine, or failing the step)",
    CHECK_LABELS,
)


def connect() -> None:
    """Observe every step run's end (processes.apps)."""
    events.run_ended.connect(_run_ended, sender=InstanceExec, dispatch_uid="bdre-metrics-run")


def _run_ended(sender: object, *, run_id: int, parent_id: int | None, **kwargs: Any) -> None:
    if parent_id is None:  # a job's run: counted from the database at the scrape
        return
    # After the commit: a lifecycle call that rolls back ended nothing.
    transaction.on_commit(partial(observe_step_run, run_id))


def observe_step_run(run_id: int) -> None:
    """Record a finished step run's duration and, for a shred, its counters. Never raises:
    metrics must not fail a run."""
    try:
        run = (
            InstanceExec.objects.select_related(
                "process__parent", "process__process_type", "process__bus_domain__team"
            )
            .filter(pk=run_id, end_ts__isnull=False)
            .first()
        )
        if run is None or run.end_ts is None:
            return
        step = run.process
        labels = step_labels(step)
        state = ExecState(run.exec_state_id).name.lower()
        kind = step.process_type.job_kind
        seconds = max((run.end_ts - run.start_ts).total_seconds(), 0.0)
        observe_step(labels, kind=kind, state=state, seconds=seconds)
        if kind == "spark.shred" and run.exec_state_id == ExecState.SUCCESS:
            count_shred(labels, run.counters or {})
        count_checks(labels, run.checks or [])
    except Exception:
        log.exception("metrics: cannot observe the end of step run %s", run_id)


def step_labels(step: Process) -> dict[str, str]:
    job = step.parent or step
    return {
        "team": step.bus_domain.team.name,
        "job_name": job.name,
        "step_name": step.name,
    }


def observe_step(labels: dict[str, str], *, kind: str, state: str, seconds: float) -> None:
    STEP_DURATION.labels(**labels, kind=kind, state=state).observe(seconds)


def count_shred(labels: dict[str, str], counters: dict[str, Any]) -> None:
    def number(key: str) -> float:
        value = counters.get(key)
        return float(value) if isinstance(value, int | float) and value > 0 else 0.0

    SHRED_READ.labels(**labels).inc(number("rows_in"))
    SHRED_WRITTEN.labels(**labels).inc(number("rows_out"))
    SHRED_BAD.labels(**labels).inc(number("bad_rows"))
    for key in counters:
        if key.startswith(DUPLICATE_PREFIX):
            strategy = key.removeprefix(DUPLICATE_PREFIX)
            SHRED_DUPLICATES.labels(**labels, strategy=strategy).inc(number(key))


def count_checks(labels: dict[str, str], checks: list[dict[str, Any]]) -> None:
    """The expectations of a step run that failed: one failure each, and their rows."""
    for check in checks:
        failed = check.get("failed")
        if expectations.is_failure(check):
            rule = {"table": check["table"], "rule": check["rule"], "action": check["action"]}
            CHECK_FAILURES.labels(**labels, **rule).inc()
            if isinstance(failed, int) and failed > 0:
                CHECK_FAILED_ROWS.labels(**labels, **rule).inc(failed)


# --- at the scrape -------------------------------------------------------------------------


class RegistryCollector:
    """Runs by job and state, and the scans' lags, from the database."""

    def collect(self) -> Iterator[Metric]:
        yield self.runs()
        yield from self.scans()

    def runs(self) -> GaugeMetricFamily:
        runs = GaugeMetricFamily(
            "bdre_runs",
            "Job runs recorded, by job and state (running: in progress now)",
            labels=["team", "job_name", "state"],
        )
        rows = (
            InstanceExec.objects.filter(parent__isnull=True, process__deleted=False)
            .values("process__bus_domain__team__name", "process__name", "exec_state_id")
            .annotate(n=Count("id"))
            .order_by("process__bus_domain__team__name", "process__name", "exec_state_id")
        )
        for row in rows:
            state = ExecState(row["exec_state_id"]).name.lower()
            team, job = row["process__bus_domain__team__name"], row["process__name"]
            runs.add_metric([team, job, state], row["n"])
        return runs

    def scans(self) -> Iterator[GaugeMetricFamily]:
        listed = GaugeMetricFamily(
            "bdre_scan_last_run_age_seconds",
            "Seconds since each ingest.scan step last listed its location (a run or a quiet check)",
            labels=STEP_LABELS,
        )
        found = GaugeMetricFamily(
            "bdre_scan_last_new_file_age_seconds",
            "Seconds since each ingest.scan step's last successful run that registered a new "
            "file (absent: none ever did)",
            labels=STEP_LABELS,
        )
        now = timezone.now()
        steps = Process.objects.filter(
            deleted=False, parent__isnull=False, process_type__job_kind="ingest.scan"
        ).select_related("parent", "bus_domain__team")
        # A quiet check lists the location as a scan run does (docs/operations.md, "Quiet
        # scans"): whichever of the two came last is when the location was last listed.
        last_listed = {
            step_id: max(ts for ts in (scanned, checked) if ts is not None)
            for step_id, scanned, checked in ScanState.objects.filter(
                process__in=steps
            ).values_list("process_id", "last_scan_ts", "last_checked_ts")
            if scanned is not None or checked is not None
        }
        for step in steps.order_by("id"):
            labels = step_labels(step)
            values = [labels[k] for k in STEP_LABELS]
            when = last_listed.get(step.pk)
            if when is not None:
                listed.add_metric(values, (now - when).total_seconds())
            # The step's runs newest first on their index: the scan only reads back to its
            # last find.
            last_find = (
                InstanceExec.objects.filter(
                    process=step, exec_state_id=ExecState.SUCCESS, counters__registered__gt=0
                )
                .order_by("-id")
                .values_list("end_ts", flat=True)
                .first()
            )
            if last_find is not None:
                found.add_metric(values, (now - last_find).total_seconds())
        yield listed
        yield found
