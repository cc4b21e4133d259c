"""Thin Celery tasks: send one alert, and Beat's periodic check of SLAs and freshness."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import beat_init
from django.conf import settings
from django.db import transaction

from alerts import services

log = logging.getLogger(__name__)

CHECK_NAME = "bdre-alerts-check"
CHECK_TASK = "alerts.tasks.check_alerts"


@shared_task(name="alerts.tasks.send_alert")
def send_alert(
    kind: str, job_id: int, run_id: int | None = None, detail: str = "", key: str = ""
) -> list[int]:
    sent = services.raise_alert(kind, job_id, run_id=run_id, detail=detail, key=key)
    return [alert.pk for alert in sent]


@shared_task(name=CHECK_TASK)
def check_alerts() -> list[int]:
    sent = [alert.pk for alert in services.run_checks()]
    services.purge_expired()
    return sent


def _send(kind: str, job_id: int, run_id: int | None, detail: str, key: str = "") -> None:
    send_alert.apply_async(
        (kind, job_id),
        {"run_id": run_id, "detail": detail, "key": key},
        queue=settings.BDRE_QUEUE,
    )


def enqueue(kind: str, job_id: int, *, run_id: int | None = None, detail: str = "") -> None:
    """Send the alert from a worker once the current transaction commits (the lifecycle's:
    a call that rolls back alerts nobody), and only if it would go somewhere. Robust: a
    broker that is down loses the alert (logged), never the answer of the lifecycle call."""

    def send() -> None:
        if services.wants(job_id, kind):
            _send(kind, job_id, run_id, detail)

    transaction.on_commit(send, robust=True)


def enqueue_if_late(run_id: int) -> None:
    """Once the run's end commits: its SLA alert, if it took longer than its job's SLA."""

    def send() -> None:
        due = services.ended_late(run_id)
        if due is not None and services.wants(due.job_id, due.kind):
            _send(due.kind, due.job_id, due.run_id, due.detail, due.key)

    transaction.on_commit(send, robust=True)


@beat_init.connect(dispatch_uid="bdre-alerts-check-schedule")
def _schedule_the_checks(sender: object = None, **kwargs: object) -> None:
    """Beat keeps the SLA and freshness check in its schedule whatever was deleted by hand."""
    from bdre.beat import ensure_interval_task

    ensure_interval_task(CHECK_NAME, CHECK_TASK, settings.BDRE_ALERT_CHECK_SECONDS)
