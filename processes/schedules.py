"""A job's schedule, kept in a django-celery-beat ``PeriodicTask`` that follows the job.

One service for the UI, the API, the admin and the commands: ``set_schedule`` creates or
changes it (a cron expression or an interval, in a time zone), ``pause`` and ``resume`` switch
it, ``remove`` deletes it (also called when the job is deleted). Beat's DatabaseScheduler
picks the changes up by itself.

A job can also run as soon as one of its upstream jobs has queued a batch for it
(``on_upstream``): kept as the job's property ``schedule.on_upstream`` and acted on by the
orchestrator when the upstream job halts.
"""

from __future__ import annotations

import json
import zoneinfo
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from bdre.beat import ensure_interval_task
from bdre.errors import BdreError, Code
from processes.models import SCHEDULE_GROUP, Process, Property

RUN_TASK = "processes.tasks.run_process"
REAPER_TASK = "processes.tasks.reap_expired_runs"
REAPER_NAME = "bdre: reap expired runs"


def task_name(job_id: int) -> str:
    return f"bdre: run process {job_id}"


@dataclass(frozen=True)
class Schedule:
    cron: str = ""  # "minute hour day-of-month month day-of-week"
    every_seconds: int | None = None
    timezone: str = "UTC"
    enabled: bool = True  # the timed schedule's own switch (Beat skips a disabled task)
    on_upstream: bool = False
    next_run: str | None = None  # read only: when Beat will run it next, ISO 8601
    paused: bool = False  # read only: whether the job is paused, timed schedule or not

    @property
    def is_timed(self) -> bool:
        return bool(self.cron) or bool(self.every_seconds)

    @property
    def next_run_at(self) -> datetime | None:
        return datetime.fromisoformat(self.next_run) if self.next_run else None


def _crontab(cron: str, tz: str) -> CrontabSchedule:
    fields = cron.split()
    if len(fields) != 5:
        raise ValidationError(
            {"cron": f"a cron expression has 5 fields (minute hour day month weekday): {cron!r}"}
        )
    minute, hour, day_of_month, month_of_year, day_of_week = fields
    try:
        from celery.schedules import crontab

        crontab(minute, hour, day_of_week, day_of_month, month_of_year)  # validates each field
    except (ValueError, TypeError) as exc:
        raise ValidationError({"cron": f"{cron!r}: {exc}"}) from exc
    schedule, _ = CrontabSchedule.objects.get_or_create(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month_of_year,
        day_of_week=day_of_week,
        timezone=tz,
    )
    return schedule


def _validate(schedule: Schedule) -> None:
    if schedule.cron and schedule.every_seconds:
        raise ValidationError({"cron": "give a cron expression or an interval, not both"})
    if schedule.every_seconds is not None and schedule.every_seconds < 1:
        raise ValidationError({"every_seconds": "an interval is at least 1 second"})
    try:
        zoneinfo.ZoneInfo(schedule.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError({"timezone": f"unknown time zone {schedule.timezone!r}"}) from exc


def _job(job_id: int) -> Process:
    # Locked (in the caller's transaction): a pause and a schedule change at once never
    # lose one another (change_timing reads the pause, then writes it back), and init_job,
    # which checks the pause under the same lock, never starts a run after a pause returned.
    return Process.objects.get_live_job(job_id, lock=True)


@transaction.atomic
def set_schedule(job_id: int, schedule: Schedule) -> Schedule:
    """Create or change the job's schedule. With neither cron nor interval, the timed
    schedule is removed (the job may still run on upstream batches or by hand)."""
    _validate(schedule)
    job = _job(job_id)
    _set_on_upstream(job, schedule.on_upstream)
    _set_paused(job, not schedule.enabled)
    if not schedule.is_timed:
        PeriodicTask.objects.filter(name=task_name(job.pk)).delete()
        return schedule_of(job.pk)
    timing: dict[str, object] = {"crontab": None, "interval": None}
    if schedule.cron:
        timing["crontab"] = _crontab(schedule.cron, schedule.timezone)
    else:
        timing["interval"], _ = IntervalSchedule.objects.get_or_create(
            every=schedule.every_seconds, period=IntervalSchedule.SECONDS
        )
    task, _ = PeriodicTask.objects.update_or_create(
        name=task_name(job.pk),
        defaults={
            **timing,
            "task": RUN_TASK,
            "args": json.dumps([job.pk]),
            "enabled": schedule.enabled,
            "description": f"Runs {job.name}",
        },
    )
    # update(): no save signal, and the job's other fields stay as they are in the database.
    Process.objects.filter(pk=job.pk).update(schedule=task)
    return schedule_of(job.pk)


@transaction.atomic
def change_timing(job_id: int, schedule: Schedule) -> Schedule:
    """Change the job's timing and upstream trigger, paused or not as it is: the schedule
    edits of the pages and the command, which say nothing of the pause (a PUT of the API
    gives ``enabled`` and so replaces it)."""
    _job(job_id)  # the lock first, then the pause as it stands
    return set_schedule(job_id, replace(schedule, enabled=not is_paused(job_id)))


def _set_on_upstream(job: Process, on_upstream: bool) -> None:
    Property.objects.update_or_create(
        process=job,
        config_group=SCHEDULE_GROUP,
        key="on_upstream",
        defaults={
            "value": "true" if on_upstream else "false",
            "description": "run as soon as an upstream job has queued a batch for this job",
        },
    )


def _set_paused(job: Process, paused: bool) -> None:
    Property.objects.update_or_create(
        process=job,
        config_group=SCHEDULE_GROUP,
        key="paused",
        defaults={
            "value": "true" if paused else "false",
            "description": "paused: no schedule, upstream or replay trigger starts the job",
        },
    )


@transaction.atomic
def set_on_upstream(job_id: int, on_upstream: bool) -> Schedule:
    """Whether the job runs as soon as an upstream job queued a batch for it; its timed
    schedule, paused or not, stays as it is."""
    job = _job(job_id)
    _set_on_upstream(job, on_upstream)
    return schedule_of(job.pk)


@transaction.atomic
def _set_enabled(job_id: int, enabled: bool) -> Schedule:
    """A pause is the job's, not only its timed schedule's: a job that runs only on its
    upstream (or only by hand) is paused as well, and its timed schedule, if it has one,
    follows."""
    job = _job(job_id)
    _set_paused(job, not enabled)
    task = PeriodicTask.objects.filter(name=task_name(job.pk)).first()
    if task is not None and task.enabled != enabled:
        task.enabled = enabled
        task.save(update_fields=["enabled"])  # save() so Beat sees the change
    return schedule_of(job.pk)


def pause(job_id: int) -> Schedule:
    return _set_enabled(job_id, False)


def resume(job_id: int) -> Schedule:
    return _set_enabled(job_id, True)


@transaction.atomic
def remove(job_id: int) -> None:
    """Delete the job's schedule (timed and on-upstream)."""
    PeriodicTask.objects.filter(name=task_name(job_id)).delete()
    Property.objects.filter(process_id=job_id, config_group=SCHEDULE_GROUP).delete()


def runs_on_upstream(job_id: int) -> bool:
    return job_id in _on_upstream([job_id])


def paused(job_ids: list[int]) -> set[int]:
    """The paused jobs: paused through BDRE, or whose timed schedule was switched off (in
    Beat's own admin, say). A pause holds every trigger of the job: Beat skips its disabled
    task, its upstream does not start it (``orchestrator``), a run sent before the pause or
    a backfill's next rebuild does not start (``hold``), and "run now" asks first."""
    names = {task_name(job_id): job_id for job_id in job_ids}
    off = {
        names[name]
        for name in PeriodicTask.objects.filter(name__in=names, enabled=False).values_list(
            "name", flat=True
        )
    }
    return off | _flagged(job_ids, "paused")


def is_paused(job_id: int) -> bool:
    return job_id in paused([job_id])


def hold(job_id: int, *, manual: bool, force: bool = False) -> None:
    """116 when the job is paused. "Run now" (``manual``) passes when the user confirmed it
    (``force``): a pause is meant to hold the job, so running it anyway is asked for, not
    assumed. Every other trigger (the schedule, the upstream, the next rebuild of a
    backfill, a run sent to the workers before the pause) is held, checked when the run
    would start."""
    if is_paused(job_id) and not (manual and force):
        how = (
            "resume it, or run it anyway (force: true in the API, --force on the command "
            "line, the second button on its page)"
            if manual
            else "it runs when it is resumed"
        )
        raise BdreError(Code.JOB_PAUSED, f"process {job_id} is paused: {how}")


def _flagged(job_ids: list[int], key: str) -> set[int]:
    return set(
        Property.objects.filter(
            process_id__in=job_ids, config_group=SCHEDULE_GROUP, key=key, value="true"
        ).values_list("process_id", flat=True)
    )


def _on_upstream(job_ids: list[int]) -> set[int]:
    return _flagged(job_ids, "on_upstream")


def schedule_of(job_id: int) -> Schedule:
    return schedules_of([job_id])[job_id]


def schedules_of(job_ids: list[int]) -> dict[int, Schedule]:
    """The schedules of many jobs in two queries (the dashboard lists every job's)."""
    flags: dict[int, set[str]] = {}
    for job_id, key in (
        Property.objects.filter(
            process_id__in=job_ids, config_group=SCHEDULE_GROUP, key__in=("on_upstream", "paused")
        )
        .filter(value="true")
        .values_list("process_id", "key")
    ):
        flags.setdefault(job_id, set()).add(key)
    tasks = {
        task.name: task
        for task in PeriodicTask.objects.select_related("crontab", "interval").filter(
            name__in=[task_name(job_id) for job_id in job_ids]
        )
    }
    return {
        job_id: _schedule(tasks.get(task_name(job_id)), flags.get(job_id, set()))
        for job_id in job_ids
    }


def _schedule(task: PeriodicTask | None, flags: set[str]) -> Schedule:
    on_upstream = "on_upstream" in flags
    if task is None:
        paused = "paused" in flags
        return Schedule(on_upstream=on_upstream, enabled=not paused, paused=paused)
    paused = "paused" in flags or not task.enabled
    next_run = None
    if task.enabled:
        remaining = task.schedule.remaining_estimate(task.last_run_at or task.date_changed)
        next_run = (task.schedule.now() + max(remaining, timedelta(0))).isoformat()
    if task.crontab is not None:
        c = task.crontab
        cron = f"{c.minute} {c.hour} {c.day_of_month} {c.month_of_year} {c.day_of_week}"
        return Schedule(
            cron=cron,
            timezone=str(c.timezone),
            enabled=task.enabled,
            on_upstream=on_upstream,
            next_run=next_run,
            paused=paused,
        )
    return Schedule(
        every_seconds=int(timedelta(**{task.interval.period: task.interval.every}).total_seconds()),
        enabled=task.enabled,
        on_upstream=on_upstream,
        next_run=next_run,
        paused=paused,
    )


def ensure_reaper(every_seconds: int = 60) -> PeriodicTask:
    """The periodic reaper of expired runs (idempotent)."""
    return ensure_interval_task(REAPER_NAME, REAPER_TASK, every_seconds)
