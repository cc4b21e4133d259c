from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from alerts import services, tasks
from alerts.models import Alert, Kind
from processes import lifecycle
from processes.models import InstanceExec
from tests.helpers.alerts import alerting

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


def test_the_periodic_check_deletes_alerts_past_their_retention_and_keeps_the_rest(
    make_job, webhook, settings
):
    settings.BDRE_ALERT_RETENTION_DAYS = 30
    job = alerting(make_job("orders"), webhook=webhook.url)
    [old] = services.raise_alert(Kind.FAILURE, job.pk, detail="last month")
    [new] = services.raise_alert(Kind.DEAD_LETTER, job.pk, detail="today")
    Alert.objects.filter(pk=old.pk).update(created_ts=timezone.now() - timedelta(days=31))
    tasks.check_alerts.apply().get()
    assert list(Alert.objects.values_list("pk", flat=True)) == [new.pk]


def test_a_retention_of_zero_keeps_every_alert(make_job, webhook, settings):
    settings.BDRE_ALERT_RETENTION_DAYS = 0
    job = alerting(make_job("orders"), webhook=webhook.url)
    services.raise_alert(Kind.FAILURE, job.pk, detail="long ago")
    Alert.objects.update(created_ts=timezone.now() - timedelta(days=3650))
    tasks.check_alerts.apply().get()
    assert Alert.objects.count() == 1
