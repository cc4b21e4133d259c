"""The admin: every model's pages render, masters and the system's rows are read-only, and
only superusers get in. Each app's own admin (its secrets, filters and actions) is tested in
tests/<app>/test_admin.py."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission

from batches.models import BatchConsumpQueue, BatchState
from bdre.models import Membership
from processes.models import ExecState, InstanceExec, Process
from tests.helpers.admin import url
from tests.helpers.factories import (
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


def test_master_tables_cannot_be_changed(client, superuser):
    from processes.models import ExecStatus

    client.force_login(superuser)
    response = client.post(url(ExecStatus, "change", 2), {"name": "HACKED"})
    assert response.status_code == 403
    assert ExecStatus.objects.get(pk=2).name == "RUNNING"


def test_a_staff_viewer_cannot_make_himself_admin_of_another_team_in_admin(client, team):
    """The attack: staff with every membership permission, viewer of one team,
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
    from tests.helpers.factories import TEST_PASSWORD

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


def test_drf_tokens_that_authenticate_nothing_have_no_admin_page(client, superuser):
    client.force_login(superuser)
    index = client.get("/admin/").content.decode()
    assert "/admin/authtoken/" not in index
    assert "/admin/bdre/apitoken/" in index
