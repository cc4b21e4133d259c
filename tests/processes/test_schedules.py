"""A job's schedule lives in a django-celery-beat PeriodicTask that follows the job."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from bdre.errors import BdreError
from processes import schedules
from processes.schedules import Schedule

pytestmark = pytest.mark.django_db


def task_of(job) -> PeriodicTask:
    return PeriodicTask.objects.get(name=schedules.task_name(job.pk))


def test_a_cron_schedule_creates_a_periodic_task_that_runs_the_job(make_job):
    job = make_job("nightly")
    shown = schedules.set_schedule(job.pk, Schedule(cron="30 2 * * 1-5", timezone="Europe/Paris"))
    task = task_of(job)
    assert task.task == "processes.tasks.run_process"
    assert json.loads(task.args) == [job.pk]
    assert task.enabled
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("30", "2", "1-5")
    assert str(task.crontab.timezone) == "Europe/Paris"
    assert shown.cron == "30 2 * * 1-5" and shown.timezone == "Europe/Paris"
    assert shown.next_run is not None


def test_changing_to_an_interval_replaces_the_cron(make_job):
    job = make_job("often")
    schedules.set_schedule(job.pk, Schedule(cron="0 * * * *"))
    schedules.set_schedule(job.pk, Schedule(every_seconds=90))
    task = task_of(job)
    assert task.crontab is None
    assert (task.interval.every, task.interval.period) == (90, "seconds")
    assert schedules.schedule_of(job.pk).every_seconds == 90
    assert PeriodicTask.objects.filter(name=schedules.task_name(job.pk)).count() == 1


def test_pause_and_resume_switch_the_task(make_job):
    job = make_job("switch")
    schedules.set_schedule(job.pk, Schedule(every_seconds=60))
    assert schedules.pause(job.pk).enabled is False
    assert task_of(job).enabled is False
    assert schedules.schedule_of(job.pk).next_run is None
    assert schedules.resume(job.pk).enabled is True
    assert task_of(job).enabled is True


def test_deleting_the_job_deletes_its_schedule(make_job):
    job = make_job("gone")
    schedules.set_schedule(job.pk, Schedule(every_seconds=60, on_upstream=True))
    job.deleted = True
    job.save()
    assert not PeriodicTask.objects.filter(name=schedules.task_name(job.pk)).exists()
    assert not schedules.runs_on_upstream(job.pk)


def test_removing_the_timing_keeps_the_upstream_trigger(make_job):
    job = make_job("triggered")
    schedules.set_schedule(job.pk, Schedule(every_seconds=60))
    shown = schedules.set_schedule(job.pk, Schedule(on_upstream=True))
    assert not PeriodicTask.objects.filter(name=schedules.task_name(job.pk)).exists()
    assert shown.on_upstream and not shown.cron and shown.every_seconds is None


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        (Schedule(cron="* * *"), "cron"),
        (Schedule(cron="61 * * * *"), "cron"),
        (Schedule(cron="0 * * * *", every_seconds=60), "cron"),
        (Schedule(every_seconds=0), "every_seconds"),
        (Schedule(cron="0 * * * *", timezone="Mars/Olympus"), "timezone"),
    ],
)
def test_an_invalid_schedule_names_its_field(make_job, schedule, field):
    job = make_job("bad")
    with pytest.raises(ValidationError) as caught:
        schedules.set_schedule(job.pk, schedule)
    assert field in caught.value.message_dict
    assert not PeriodicTask.objects.filter(name=schedules.task_name(job.pk)).exists()


def test_a_step_has_no_schedule(make_job):
    job = make_job("parent")
    step = job.steps.get()
    with pytest.raises(BdreError) as refused:
        schedules.set_schedule(step.pk, Schedule(every_seconds=60))
    assert (refused.value.code, refused.value.http_status) == (102, 404)


def test_the_reaper_is_scheduled_once(db):
    schedules.ensure_reaper(30)
    schedules.ensure_reaper(30)
    task = PeriodicTask.objects.get(name=schedules.REAPER_NAME)
    assert task.task == "processes.tasks.reap_expired_runs"
    assert task.interval.every == 30


def test_the_schedule_command_sets_pauses_and_shows(make_job, capsys):
    job = make_job("cli")
    call_command("schedule", "--process-id", str(job.pk), "--cron", "0 3 * * *")
    assert json.loads(capsys.readouterr().out)["cron"] == "0 3 * * *"
    call_command("schedule", "--process-id", str(job.pk), "--pause")
    assert json.loads(capsys.readouterr().out)["enabled"] is False
    call_command("schedule", "--process-id", str(job.pk), "--on-upstream")
    shown = json.loads(capsys.readouterr().out)
    assert shown["on_upstream"] is True and shown["cron"] == "0 3 * * *"
