"""The admin's actions on jobs call the same services as the API and the commands."""

from __future__ import annotations

import pytest
from django.urls import reverse

from processes import lifecycle, schedules, tasks
from processes.models import ExecState, InstanceExec, Process
from processes.schedules import Schedule

pytestmark = pytest.mark.django_db
CHANGELIST = reverse("admin:processes_process_changelist")


def act(client, action: str, *jobs: Process):
    return client.post(
        CHANGELIST,
        {"action": action, "_selected_action": [j.pk for j in jobs]},
        follow=True,
    )


def texts(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_run_now_queues_each_selected_job(
    client, superuser, make_job, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(tasks.run_process, "apply_async", lambda args, **kw: sent.append(args))
    a, b = make_job("a"), make_job("b")
    client.force_login(superuser)
    with django_capture_on_commit_callbacks(execute=True):
        response = act(client, "run_now", a, b)
    assert sorted(sent) == [(a.pk, None), (b.pk, None)]
    assert texts(response) == ["Queued: a, b"]


def test_pause_and_resume_follow_the_schedule(client, superuser, make_job):
    job = make_job("timed")
    schedules.set_schedule(job.pk, Schedule(every_seconds=60))
    job.refresh_from_db()
    assert job.schedule.name == schedules.task_name(job.pk)
    client.force_login(superuser)
    act(client, "pause_schedule", job)
    assert schedules.schedule_of(job.pk).enabled is False
    act(client, "resume_schedule", job)
    assert schedules.schedule_of(job.pk).enabled is True


def test_an_action_a_job_refuses_says_why(client, superuser, make_job):
    idle, busy = make_job("idle"), make_job("busy")
    claim = lifecycle.init_job(busy.pk, 1)
    client.force_login(superuser)
    response = act(client, "terminate", idle, busy)
    assert InstanceExec.objects.get(pk=claim.instance_exec_id).exec_state_id == ExecState.FAILED
    messages = texts(response)
    assert [m for m in messages if m.startswith("idle: ")], messages
    assert "Terminated: busy" in messages
    assert "has no timed schedule" in " ".join(texts(act(client, "pause_schedule", idle)))
