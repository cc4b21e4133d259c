"""The processes' admin: its actions on jobs and runs call the same services as the API and
the commands, it writes rows through the services the API writes them with (and refuses
what they refuse), and a server's secrets are never shown."""

from __future__ import annotations

import pytest

from alerts.models import Destination
from processes import lifecycle, schedules
from processes.models import BusDomain, ExecState, InstanceExec, Property, Server
from processes.schedules import Schedule
from tests.helpers.admin import act, action, texts, url
from tests.helpers.factories import InstanceExecFactory, JobFactory, ServerFactory
from tests.helpers.jobs import build_job, callable_step

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


# --- rows with rules of their own: the admin writes them through the same services ---------


def test_the_admin_refuses_a_property_the_api_refuses(client, superuser, team):
    job = build_job(team, "tool", [callable_step("tool_call", "processes.examples.noop")])
    prop = Property.objects.get(process__parent=job, config_group="callable", key="path")
    client.force_login(superuser)
    fields = {"process": prop.process_id, "config_group": "callable", "key": "path"}
    page = client.post(url(Property, "change", prop.pk), {**fields, "value": "os.system"})
    assert page.status_code == 200  # the form again, with the reason on the value
    assert "BDRE_CALLABLES" in page.context["adminform"].form.errors["value"][0]
    prop.refresh_from_db()
    assert prop.value == "processes.examples.noop"
    prop.delete()
    added = client.post(url(Property, "add"), {**fields, "value": "os.system"})
    assert "BDRE_CALLABLES" in added.context["adminform"].form.errors["value"][0]
    assert not Property.objects.filter(config_group="callable").exists()
    allowed = client.post(url(Property, "add"), {**fields, "value": "processes.examples.noop"})
    assert allowed.status_code == 302
    assert Property.objects.get(config_group="callable").value == "processes.examples.noop"


def test_the_admin_names_an_application_or_server_once_per_team(client, superuser, team):
    client.force_login(superuser)
    taken = {"name": team.application.name, "team": team.group.pk, "description": "", "owner": ""}
    page = client.post(url(BusDomain, "add"), taken)
    assert page.context["adminform"].form.errors["name"] == [
        f"An application named {team.application.name} exists already in team {team.group}."
    ]
    server = ServerFactory(team=team.group)
    page = client.post(
        url(Server, "add"), {"team": team.group.pk, "server_type": "s3", "name": server.name}
    )
    assert page.context["adminform"].form.errors["name"] == [
        f"A server named {server.name} exists already in team {team.group}."
    ]
    assert Server.objects.filter(name=server.name).count() == 1


def test_the_admin_refuses_a_destination_the_team_page_refuses(client, superuser, team):
    client.force_login(superuser)
    row = {"team": team.group.pk, "kinds": ""}
    page = client.post(
        url(Destination, "add"), {**row, "channel": "webhook", "target": "file:///etc/passwd"}
    )
    assert page.status_code == 200
    assert "is not an http:// or https:// URL" in page.context["adminform"].form.errors["target"][0]
    assert not Destination.objects.exists()
    mail = {**row, "channel": "email", "target": "oncall@example.com"}
    assert client.post(url(Destination, "add"), mail).status_code == 302
    again = client.post(url(Destination, "add"), mail)
    assert again.context["adminform"].form.errors["target"] == [
        f"Team {team.group.name} has this email destination already."
    ]
    assert Destination.objects.count() == 1
