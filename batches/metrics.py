"""The queue's numbers for ``/metrics``, counted from the database at each scrape
(bdre/metrics.py serves them; docs/operations.md, "Metrics, JSON logs and Flower"):

- ``bdre_queue_depth``: rows waiting for each consuming step, by state (new: never claimed;
  accessed: claimed by a run in progress; failed: to be retried by the next run);
- ``bdre_queue_lag_seconds``: age of the oldest of those rows, 0 when none waits: how far
  behind its upstream the step is;
- ``bdre_dead_letters``: rows discarded after ``max_retries`` failed runs, until requeued.

Every live step that consumes an upstream has its series, at 0 when nothing waits, so that
an alert can tell "empty" from "gone".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from batches.models import BatchConsumpQueue, BatchState
from processes.models import Process

WAITING = (BatchState.NEW, BatchState.ACCESSED, BatchState.FAILED)
LABELS = ["team", "job_name", "step_name"]


class QueueCollector:
    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "bdre_queue_depth",
            "Queued rows waiting for each consuming step, by state",
            labels=[*LABELS, "state"],
        )
        lag = GaugeMetricFamily(
            "bdre_queue_lag_seconds",
            "Age of the oldest queued row waiting for each consuming step (0: none waits)",
            labels=LABELS,
        )
        dead = GaugeMetricFamily(
            "bdre_dead_letters",
            "Queued rows discarded after max_retries failed runs (dead letters), by step",
            labels=LABELS,
        )
        counts: dict[int, dict[int, int]] = defaultdict(dict)
        oldest: dict[int, datetime] = {}
        for row in (
            BatchConsumpQueue.objects.filter(batch_state_id__in=[*WAITING, BatchState.DISCARDED])
            .values("process_id", "batch_state_id")
            .annotate(n=Count("id"), first=Min("insert_ts"))
            .order_by()
        ):
            step_id, state = row["process_id"], row["batch_state_id"]
            counts[step_id][state] = row["n"]
            if state in WAITING and (step_id not in oldest or row["first"] < oldest[step_id]):
                oldest[step_id] = row["first"]
        consumers = Process.objects.filter(
            deleted=False, parent__isnull=False, enqueuing_processes__isnull=False
        ).values_list("pk", flat=True)
        # The live consuming steps, and any step that still has rows (its upstream since
        # removed): a row waiting somewhere is never hidden.
        step_ids = set(consumers) | set(counts)
        now = timezone.now()
        steps = (
            Process.objects.filter(pk__in=step_ids)
            .select_related("parent", "bus_domain__team")
            .order_by("id")
        )
        for step in steps:
            job = step.parent or step
            values = [step.bus_domain.team.name, job.name, step.name]
            for state in WAITING:
                depth.add_metric([*values, state.name.lower()], counts[step.pk].get(state, 0))
            first = oldest.get(step.pk)
            lag.add_metric(values, (now - first).total_seconds() if first else 0.0)
            dead.add_metric(values, counts[step.pk].get(BatchState.DISCARDED, 0))
        yield depth
        yield lag
        yield dead
