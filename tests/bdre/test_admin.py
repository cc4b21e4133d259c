"""The admin: every model's pages render, masters are read-only, secrets never shown, and
staff see only their teams' rows."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.urls import reverse

from bdre.admin import ReadOnlyAdmin
from processes.models import Server
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
    read_only = isinstance(admin.site._registry[model], ReadOnlyAdmin)
    assert add.status_code == (403 if read_only else 200)


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


def test_staff_who_are_not_superusers_see_only_their_teams(client, team):
    mine = JobFactory(bus_domain=team.application)
    theirs = JobFactory(bus_domain=team.other_application)
    team.developer.is_staff = True
    team.developer.save()
    team.developer.user_permissions.set(Permission.objects.filter(codename="view_process"))
    client.force_login(team.developer)
    page = client.get(url(type(mine), "changelist"))
    assert page.status_code == 200
    shown = list(page.context["cl"].queryset)
    assert mine in shown and theirs not in shown
    assert client.get(url(type(mine), "change", theirs.pk)).status_code == 302  # not found


def test_demo_user_logs_in_and_sees_the_demo_pipeline(client):
    from processes.demo import set_up_demo

    demo = set_up_demo()
    assert client.login(username=demo.username, password=demo.password)
    page = client.get(url(type(demo.jobs[0]), "changelist"))
    html = page.content.decode()
    for name in ("clickstream_ingest", "clickstream_shred", "clickstream_daily"):
        assert name in html
