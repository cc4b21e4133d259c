"""Beat's own periodic tasks (the reaper, the catalog's sync, the alerts' checks): one row per
task in django-celery-beat's schedule, kept there by the app that owns the task each time
Beat starts."""

from __future__ import annotations

from django_celery_beat.models import IntervalSchedule, PeriodicTask


def ensure_interval_task(
    name: str, task: str, every_seconds: int, *, queue: str | None = None, enabled: bool = True
) -> PeriodicTask:
    """Schedule ``task`` every ``every_seconds`` under ``name``: created, or put back as
    configured whatever was changed or deleted by hand. Idempotent."""
    interval, _ = IntervalSchedule.objects.get_or_create(
        every=every_seconds, period=IntervalSchedule.SECONDS
    )
    periodic, _ = PeriodicTask.objects.update_or_create(
        name=name,
        defaults={
            "interval": interval,
            "crontab": None,
            "task": task,
            "queue": queue,
            "enabled": enabled,
        },
    )
    return periodic
