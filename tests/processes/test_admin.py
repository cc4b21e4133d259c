"""The processes' admin: its actions on jobs and runs call the same services as the API and
the commands, and a server's secrets are never shown."""

from __future__ import annotations

import pytest

from processes import lifecycle, schedules
from processes.models import ExecState, InstanceExec, Server
from processes.schedules import Schedule
from tests.helpers.admin import act, action, texts, url
from tests.helpers.factories import InstanceExecFactory, JobFactory, ServerFactory

pytestmark = pytest.mark.django_db


def test_run_now_starts_each_selected_job(
    client, superuser, make_job, sent, django_capture_on_commit_callbacks
):
    a, b = make_job("a"), make_job("b")
    client.force_login(superuser)
    with django_capture_on_commit_callbacks(execute=True):
        response = act(client, "run_now", a, b)
    runs = {job.pk: InstanceExec.objects.get(process=job).pk for job in (a, b)}
    assert sorted(args for args, _ in sent) == sorted(
        (runs[job.pk], step.pk) for job in (a, b) for step in job.steps.all()
    )
    assert texts(response) == ["Started: a, b"]


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
    # A job without a timed schedule is paused all the same: a pause holds every trigger.
    assert texts(act(client, "pause_schedule", idle)) == ["Paused: idle"]
    assert schedules.is_paused(idle.pk)


def test_server_secrets_are_never_shown(client, superuser, team):
    server = ServerFactory(
        team=team.group, login_password="hunter2-secret", ssh_private_key="PRIVATE-KEY-BODY"
    )
    client.force_login(superuser)
    for page in (url(Server, "change", server.pk), url(Server, "changelist")):
        html = client.get(page).content.decode()
        assert "hunter2-secret" not in html
        assert "PRIVATE-KEY-BODY" not in html
        assert "fernet:" not in html


def test_blank_secret_on_save_keeps_the_stored_one(client, superuser, team):
    server = ServerFactory(team=team.group, login_password="keep-me")
    client.force_login(superuser)
    response = client.post(
        url(Server, "change", server.pk),
        {
            "team": team.group.pk,
            "server_type": "s3",
            "name": server.name,
            "login_password": "",
            "ssh_private_key": "",
        },
    )
    assert response.status_code == 302
    assert Server.objects.get(pk=server.pk).login_password == "keep-me"
    client.post(
        url(Server, "change", server.pk),
        {"team": team.group.pk, "server_type": "s3", "name": server.name, "login_password": "new"},
    )
    assert Server.objects.get(pk=server.pk).login_password == "new"


def test_a_multi_line_key_is_stored_exactly(client, superuser, team):
    server = ServerFactory(team=team.group)
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\nBBBB\n-----END OPENSSH PRIVATE KEY-----\n"
    client.force_login(superuser)
    client.post(
        url(Server, "change", server.pk),
        {
            "team": team.group.pk,
            "server_type": "sftp",
            "name": server.name,
            "ssh_private_key": key.replace("\n", "\r\n"),  # as a browser sends it
        },
    )
    assert Server.objects.get(pk=server.pk).ssh_private_key == key
    assert "AAAA" not in client.get(url(Server, "change", server.pk)).content.decode()


def test_the_terminate_admin_action_on_a_run_goes_through_the_lifecycle(client, superuser, team):
    job = JobFactory(bus_domain=team.application)
    run = InstanceExecFactory(process=job, exec_state_id=ExecState.RUNNING)
    done = InstanceExecFactory(process=job, exec_state_id=ExecState.SUCCESS)
    client.force_login(superuser)
    page = action(client, InstanceExec, "terminate", run.pk, done.pk)
    assert InstanceExec.objects.get(pk=run.pk).exec_state_id != ExecState.RUNNING
    assert InstanceExec.objects.get(pk=done.pk).exec_state_id == ExecState.SUCCESS
    assert "not running" in page.content.decode()
