"""The admin: every model's pages render, masters are read-only, secrets never shown, and
staff see only their teams' rows."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.urls import reverse

from batches.models import BatchConsumpQueue, BatchState
from bdre.models import Membership
from processes.models import ExecState, InstanceExec, Process, Server
from tests.factories import (
    FileFactory,
    InstanceExecFactory,
    JobFactory,
    LineageRelationFactory,
    PropertyFactory,
    QueueRowFactory,
    ServerFactory,
    StepFactory,
)

pytestmark = pytest.mark.django_db

OUR_APPS = {"bdre", "processes", "batches", "lineage"}
OUR_MODELS = [m for m in admin.site._registry if m._meta.app_label in OUR_APPS]


def url(model, action: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{action}", args=args)


@pytest.fixture
def populated(team):
    step = StepFactory(parent=JobFactory(bus_domain=team.application))
    PropertyFactory(process=step)
    InstanceExecFactory(process=step.parent)
    QueueRowFactory(process=step)
    FileFactory()
    ServerFactory(team=team.group, login_password="hunter2-secret")
    LineageRelationFactory(query__process=step)


def test_every_model_of_ours_is_registered():
    from django.apps import apps

    models = {m for app in OUR_APPS for m in apps.get_app_config(app).get_models()}
    assert models == set(OUR_MODELS)


@pytest.mark.parametrize("model", OUR_MODELS, ids=lambda m: m.__name__)
def test_changelist_and_change_pages_render(client, superuser, populated, model):
    client.force_login(superuser)
    assert client.get(url(model, "changelist")).status_code == 200
    obj = model._default_manager.first()
    if obj is not None:
        assert client.get(url(model, "change", obj.pk)).status_code == 200
    add = client.get(url(model, "add"))
    addable = admin.site._registry[model].has_add_permission(add.wsgi_request)
    assert add.status_code == (200 if addable else 403)


@pytest.mark.parametrize("model", OUR_MODELS, ids=lambda m: m.__name__)
def test_changelist_filters_and_search_do_not_fail(client, superuser, populated, model):
    client.force_login(superuser)
    model_admin = admin.site._registry[model]
    if model_admin.search_fields:
        assert client.get(url(model, "changelist"), {"q": "x"}).status_code == 200


def test_queue_can_be_filtered_by_process_and_state(client, superuser, team):
    row = QueueRowFactory(process=StepFactory(parent=JobFactory(bus_domain=team.application)))
    other = QueueRowFactory()
    client.force_login(superuser)
    page = client.get(
        url(type(row), "changelist"),
        {"process__id__exact": row.process_id, "batch_state__id__exact": 0},
    )
    assert page.status_code == 200
    assert list(page.context["cl"].queryset) == [row]
    assert other not in page.context["cl"].queryset


def test_master_tables_cannot_be_changed(client, superuser):
    from processes.models import ExecStatus

    client.force_login(superuser)
    response = client.post(url(ExecStatus, "change", 2), {"name": "HACKED"})
    assert response.status_code == 403
    assert ExecStatus.objects.get(pk=2).name == "RUNNING"


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


def test_a_staff_viewer_cannot_make_himself_admin_of_another_team_in_admin(client, team):
    """The attack of issue 18: staff with every membership permission, viewer of one team,
    adds himself as admin of another."""
    team.viewer.is_staff = True
    team.viewer.save()
    team.viewer.user_permissions.set(Permission.objects.filter(codename__endswith="membership"))
    client.force_login(team.viewer)
    answer = client.post(
        url(Membership, "add"),
        {"user": team.viewer.pk, "team": team.other_group.pk, "role": "admin"},
    )
    assert answer.status_code in (302, 403)
    assert "/admin/login/" in answer.headers.get("Location", "/admin/login/")
    assert not Membership.objects.filter(user=team.viewer, team=team.other_group).exists()
    mine = Membership.objects.get(user=team.viewer, team=team.group)
    client.post(url(Membership, "change", mine.pk), {"role": "admin"})
    assert Membership.objects.get(pk=mine.pk).role == "viewer"


def test_staff_who_are_not_superusers_get_no_admin_page(client, team):
    team.developer.is_staff = True
    team.developer.save()
    team.developer.user_permissions.set(Permission.objects.all())
    client.force_login(team.developer)
    for page in ("/admin/", url(Process, "changelist"), url(Membership, "changelist")):
        answer = client.get(page)
        assert answer.status_code == 302 and "/admin/login/" in answer["Location"]
    assert 'href="/admin/"' not in client.get("/").content.decode()


def test_staff_who_are_not_superusers_are_told_why_at_the_admin_log_in(client, team):
    from tests.factories import TEST_PASSWORD

    team.admin.is_staff = True
    team.admin.save()
    answer = client.post("/admin/login/", {"username": "admin", "password": TEST_PASSWORD})
    assert "superusers" in answer.content.decode()
    assert "_auth_user_id" not in client.session


def test_run_queue_and_batch_states_are_read_only_for_superusers_too(client, superuser, team):
    step = StepFactory(parent=JobFactory(bus_domain=team.application))
    run = InstanceExecFactory(process=step.parent, exec_state_id=ExecState.RUNNING)
    row = QueueRowFactory(process=step, batch_state_id=BatchState.FAILED)
    client.force_login(superuser)
    for obj, field in ((run, "exec_state"), (row, "batch_state"), (row.source_batch, "batch_type")):
        form = client.get(url(type(obj), "change", obj.pk))
        assert form.status_code == 200
        assert f'name="{field}"' not in form.content.decode()
    assert client.post(url(InstanceExec, "change", run.pk), {"exec_state": 7}).status_code == 403
    assert (
        client.post(url(BatchConsumpQueue, "change", row.pk), {"batch_state": 0}).status_code == 403
    )
    assert InstanceExec.objects.get(pk=run.pk).exec_state_id == ExecState.RUNNING
    assert BatchConsumpQueue.objects.get(pk=row.pk).batch_state_id == BatchState.FAILED
    assert client.get(url(BatchConsumpQueue, "add")).status_code == 403
    assert client.get(url(InstanceExec, "add")).status_code == 403


def action(client, model, name: str, *pks: int):
    return client.post(
        url(model, "changelist"),
        {"action": name, "_selected_action": [str(pk) for pk in pks]},
        follow=True,
    )


def test_the_requeue_admin_action_goes_through_the_queue_service(
    client, superuser, team, monkeypatch
):
    from batches import queue

    step = StepFactory(parent=JobFactory(bus_domain=team.application))
    dead = QueueRowFactory(process=step, batch_state_id=BatchState.DISCARDED, attempts=3)
    new = QueueRowFactory(process=step, batch_state_id=BatchState.NEW)
    called = []
    real = queue.requeue
    monkeypatch.setattr(queue, "requeue", lambda pk: called.append(pk) or real(pk))
    client.force_login(superuser)
    page = action(client, BatchConsumpQueue, "requeue", dead.pk, new.pk)
    assert sorted(called) == sorted([dead.pk, new.pk])
    dead.refresh_from_db()
    assert (dead.batch_state_id, dead.attempts) == (BatchState.NEW, 0)
    # The service's own check answers, as it does through the API: a NEW row is refused.
    assert "only failed or discarded rows can be requeued" in page.content.decode()
    assert BatchConsumpQueue.objects.get(pk=new.pk).batch_state_id == BatchState.NEW


def test_the_discard_admin_action_goes_through_the_queue_service(client, superuser, team):
    row = QueueRowFactory(process=StepFactory(parent=JobFactory(bus_domain=team.application)))
    client.force_login(superuser)
    action(client, BatchConsumpQueue, "discard", row.pk)
    row.refresh_from_db()
    assert row.batch_state_id == BatchState.DISCARDED
    assert "root" in row.last_error


def test_the_terminate_admin_action_on_a_run_goes_through_the_lifecycle(client, superuser, team):
    job = JobFactory(bus_domain=team.application)
    run = InstanceExecFactory(process=job, exec_state_id=ExecState.RUNNING)
    done = InstanceExecFactory(process=job, exec_state_id=ExecState.SUCCESS)
    client.force_login(superuser)
    page = action(client, InstanceExec, "terminate", run.pk, done.pk)
    assert InstanceExec.objects.get(pk=run.pk).exec_state_id != ExecState.RUNNING
    assert InstanceExec.objects.get(pk=done.pk).exec_state_id == ExecState.SUCCESS
    assert "not running" in page.content.decode()


def test_the_demo_login_is_a_team_member_and_its_superuser_has_the_admin(client):
    from processes.demo import set_up_demo

    demo = set_up_demo()
    assert client.login(username=demo.username, password=demo.password)
    # The team's pages show its pipeline; Django admin is the installation's, not the team's.
    html = client.get("/").content.decode()
    for name in ("clickstream_ingest", "clickstream_shred", "clickstream_daily"):
        assert name in html
    assert client.get(url(type(demo.jobs[0]), "changelist")).status_code == 302
    client.logout()
    assert client.login(username=demo.superuser, password=demo.superuser_password)
    html = client.get(url(type(demo.jobs[0]), "changelist")).content.decode()
    for name in ("clickstream_ingest", "clickstream_shred", "clickstream_daily"):
        assert name in html


def test_drf_tokens_that_authenticate_nothing_have_no_admin_page(client, superuser):
    client.force_login(superuser)
    index = client.get("/admin/").content.decode()
    assert "/admin/authtoken/" not in index
    assert "/admin/bdre/apitoken/" in index
