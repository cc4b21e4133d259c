from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from alerts import tasks
from processes import lifecycle
from processes.models import InstanceExec
from tests.alerts.conftest import alerting

pytestmark = pytest.mark.django_db


def test_beat_keeps_the_sla_and_freshness_check_in_its_schedule(settings):
    settings.BDRE_ALERT_CHECK_SECONDS = 120
    tasks._schedule_the_checks()
    PeriodicTask.objects.filter(name=tasks.CHECK_NAME).update(enabled=False)
    tasks._schedule_the_checks()
    check = PeriodicTask.objects.get(name=tasks.CHECK_NAME)
    assert (check.task, check.interval.every, check.enabled) == (tasks.CHECK_TASK, 120, True)


def test_the_periodic_check_sends_the_sla_alert_of_a_late_run(make_job, webhook):
    job = alerting(make_job("orders"), webhook=webhook.url, sla_minutes="5")
    run = lifecycle.init_job(job.pk).instance_exec_id
    InstanceExec.objects.filter(pk=run).update(start_ts=timezone.now() - timedelta(minutes=6))
    [alert_id] = tasks.check_alerts.apply().get()
    assert [(p["kind"], p["run"]["id"]) for p in webhook.posts] == [("sla", run)]
    assert tasks.check_alerts.apply().get() == []
    assert alert_id
