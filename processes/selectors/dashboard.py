"""What the dashboard shows, per job the user may see: its last run, its next scheduled run,
its queue (depth, oldest waiting batch, dead letters), its failures of the last 24 hours
that no later run resolved and the rows its steps set aside in them (bad, invalid,
duplicates, quarantined); and
over the last 24 hours, runs per hour and the depth of the queue."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min, Q, QuerySet, Sum
from django.utils import timezone

from batches.models import (
    CLAIMABLE_STATES,
    ArchiveConsumpQueue,
    BatchConsumpQueue,
    BatchState,
    Partition,
)
from processes import counters, schedules
from processes.models import ExecState, InstanceExec, Process, ProcessQuerySet
from processes.step_kinds.expectations import QUARANTINE_SUFFIX


@dataclass
class JobRow:
    job: Process
    last_run: InstanceExec | None
    next_run: datetime | None
    schedule: str  # "every 60 s", "cron ...", "after upstream", "paused", "manual"
    queue_depth: int
    oldest_waiting: datetime | None
    dead_letters: int
    failures_24h: int
    set_aside_24h: dict[str, int]  # rows its steps set aside, by why (processes.counters)


@dataclass
class HourBucket:
    start: datetime
    succeeded: int
    failed: int
    queued: int  # batches waiting at the end of the hour


def _describe(schedule: schedules.Schedule) -> str:
    if schedule.paused:
        return "paused"
    if schedule.cron:
        return f"cron {schedule.cron} ({schedule.timezone})"
    if schedule.every_seconds:
        return f"every {schedule.every_seconds} s"
    return "after upstream" if schedule.on_upstream else "manual"


def job_rows(jobs: ProcessQuerySet, now: datetime | None = None) -> list[JobRow]:
    now = now or timezone.now()
    # One read of the jobs: a job added between two reads would have no schedule below.
    live_jobs = list(jobs.live().jobs().order_by("name"))
    ids = [job.pk for job in live_jobs]
    last_ids = (
        InstanceExec.objects.filter(process_id__in=ids, parent__isnull=True)
        .values("process_id")
        .annotate(last=Max("id"))
        .values_list("last", flat=True)
    )
    last = {
        r.process_id: r
        for r in InstanceExec.objects.filter(pk__in=list(last_ids)).select_related("exec_state")
    }
    queues = {
        row["process__parent_id"]: row
        for row in BatchConsumpQueue.objects.filter(process__parent_id__in=ids)
        .values("process__parent_id")
        .annotate(
            depth=Count("id", filter=Q(batch_state_id__in=CLAIMABLE_STATES)),
            oldest=Min("insert_ts", filter=Q(batch_state_id__in=CLAIMABLE_STATES)),
            dead=Count("id", filter=Q(batch_state_id=BatchState.DISCARDED)),
        )
    }
    failures = dict(
        InstanceExec.objects.unresolved_failures()
        .filter(process_id__in=ids, end_ts__gte=now - timedelta(hours=24))
        .values("process_id")
        .annotate(n=Count("id"))
        .values_list("process_id", "n")
    )
    set_aside: dict[int, dict[str, int]] = {}
    has_any = Q()
    for key in counters.SET_ASIDE:
        has_any |= Q(counters__has_key=key)
    # Successful step runs: a failed one's batch is counted by the run that delivers it.
    step_runs = InstanceExec.objects.filter(
        has_any,
        process__parent_id__in=ids,
        exec_state_id=ExecState.SUCCESS,
        end_ts__gte=now - timedelta(hours=24),
    ).values_list("process__parent_id", "process__process_type__job_kind", "counters")
    for job_id, kind, counted in step_runs:
        assert job_id is not None  # a step run's step has its job: filtered on it
        into = set_aside.setdefault(job_id, {})
        for why, n in counters.set_aside(counted, kind=kind).items():
            into[why] = into.get(why, 0) + n
    # The rows drop expectations quarantined: what the quarantine partitions hold (a row
    # failing two rules is one row there).
    held = (
        Partition.objects.filter(
            table__table_name__endswith=QUARANTINE_SUFFIX,
            step_run__process__parent_id__in=ids,
            step_run__exec_state_id=ExecState.SUCCESS,
            step_run__end_ts__gte=now - timedelta(hours=24),
        )
        .values("step_run__process__parent_id")
        .annotate(n=Sum("rows"))
        .values_list("step_run__process__parent_id", "n")
    )
    for job_id, n in held:
        if job_id is not None and n:
            into = set_aside.setdefault(job_id, {})
            into["quarantined"] = into.get("quarantined", 0) + n
    schedule_of = schedules.schedules_of(ids)
    rows = []
    for job in live_jobs:
        schedule = schedule_of[job.pk]
        queue: Mapping[str, Any] = queues.get(job.pk, {})
        rows.append(
            JobRow(
                job=job,
                last_run=last.get(job.pk),
                next_run=schedule.next_run_at,
                schedule=_describe(schedule),
                queue_depth=queue.get("depth", 0),
                oldest_waiting=queue.get("oldest"),
                dead_letters=queue.get("dead", 0),
                failures_24h=failures.get(job.pk, 0),
                set_aside_24h=set_aside.get(job.pk, {}),
            )
        )
    return rows


def hourly(
    jobs: QuerySet[Process], hours: int = 24, now: datetime | None = None
) -> list[HourBucket]:
    """Runs finished per hour (succeeded, failed) and the batches waiting at each hour's end,
    from the queue and its archive (a row waits from its insert until its claim ends)."""
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = now - timedelta(hours=hours)
    ids = list(jobs.filter(parent__isnull=True).values_list("pk", flat=True))
    runs = InstanceExec.objects.filter(
        process_id__in=ids, parent__isnull=True, end_ts__gte=start, end_ts__lt=now
    ).values_list("end_ts", "exec_state_id")
    buckets = [HourBucket(start + timedelta(hours=h), 0, 0, 0) for h in range(hours)]
    for end_ts, state in runs:
        assert end_ts is not None  # filtered on end_ts
        bucket = buckets[int((end_ts - start).total_seconds() // 3600)]
        if state == ExecState.SUCCESS:
            bucket.succeeded += 1
        else:
            bucket.failed += 1
    # One query a table: a count for each hour's end, each with its own filter.
    ends = {f"h{h}": b.start + timedelta(hours=1) for h, b in enumerate(buckets)}
    waiting = {
        key: Count("id", filter=Q(insert_ts__lt=at) & (Q(end_ts__isnull=True) | Q(end_ts__gte=at)))
        for key, at in ends.items()
    }
    for model in (BatchConsumpQueue, ArchiveConsumpQueue):
        counts = (
            model.objects.filter(process__parent_id__in=ids, insert_ts__lt=now)
            .exclude(batch_state_id=BatchState.DISCARDED)
            .exclude(end_ts__lt=start)
            .aggregate(**waiting)
        )
        for key, bucket in zip(ends, buckets, strict=True):
            bucket.queued += counts[key]
    return buckets
