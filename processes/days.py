"""Closing days: the end-of-day marking (``EOD@<day>``, batches/markings.py) that a step cut at
``EOD`` waits for, so that it claims each day whole, once.

A job closes days with its ``run`` properties: ``close_days`` ``on_later_day`` closes every
day before the first day of a batch it queues (in ``lifecycle.halt_job``), and
``close_days_grace_hours`` closes each day once its end (in UTC, as Spark gives a batch its
days) plus that many hours has passed (here, on the reaper's tick), for the days after which
no later batch comes soon."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from batches import markings
from batches import queue as batch_queue
from processes.models import Process, Property

GROUP = "run"
ON_LATER_DAY = "close_days"
GRACE_HOURS = "close_days_grace_hours"
MAX_GRACE_HOURS = 24 * 30


class RefusedDayClose(ValueError):
    pass


def check(values: dict[str, str]) -> None:
    """Refuse a ``run`` group whose day-closing properties no job could follow."""
    mode = values.get(ON_LATER_DAY)
    if mode is not None and mode not in ("", markings.CLOSE_ON_LATER_DAY):
        raise RefusedDayClose(
            f"run.{ON_LATER_DAY} is {mode!r}: it is {markings.CLOSE_ON_LATER_DAY!r} (the first "
            "batch of a later day closes the days before it) or empty"
        )
    grace = values.get(GRACE_HOURS)
    if grace:
        try:
            hours = float(grace)
        except ValueError:
            hours = -1
        if not 0 <= hours <= MAX_GRACE_HOURS:
            raise RefusedDayClose(
                f"run.{GRACE_HOURS} is {grace!r}: a number of hours from 0 to {MAX_GRACE_HOURS}, "
                "how long after its end a day is closed"
            )


def grace_of(job: Process) -> timedelta | None:
    raw = job.property_value(GROUP, GRACE_HOURS)
    return timedelta(hours=float(raw)) if raw else None


def close_due_days(now: datetime | None = None) -> list[int]:
    """Close the days whose end plus their job's grace has passed, for every job with a
    ``close_days_grace_hours``; returns the jobs that closed a day (whose downstream jobs
    are to run now: no batch of theirs would start them)."""
    now = now or timezone.now()
    graced = Property.objects.filter(config_group=GROUP, key=GRACE_HOURS).exclude(value="")
    jobs = Process.objects.filter(
        parent__isnull=True, deleted=False, pk__in=graced.values("process_id")
    ).order_by("pk")
    closed: list[int] = []
    for job_id in jobs.values_list("pk", flat=True):
        with transaction.atomic():
            # The lifecycle's lock: a close never interleaves with the job's own halt_job.
            job = Process.objects.select_for_update(no_key=True).get(pk=job_id)
            grace = grace_of(job)
            if grace is None:
                continue
            # In UTC, as Spark's sessions (spark_conf) give a batch its days.
            open_from = (now - grace).astimezone(UTC).date().isoformat()
            if batch_queue.close_days(job, before=open_from):
                closed.append(job_id)
    return closed
