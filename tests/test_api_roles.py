"""Every resource of the REST API as each role of the team and as an outsider: lists show
only the user's teams' rows, another team's row is a 404, a viewer's write is a 403, and each
write needs its role (developer for the registry, admin for members, servers and deletes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from processes import registry
from processes.models import BusDomain, ProcessTypeId
from tests.helpers.api import api_as
from tests.helpers.factories import (
    BatchFactory,
    BusDomainFactory,
    FileFactory,
    InstanceExecFactory,
    JobFactory,
    MembershipFactory,
    PropertyFactory,
    QueueRowFactory,
    ServerFactory,
    StepFactory,
    UserFactory,
)
from tests.helpers.jobs import STEP_TYPE

# backends: who may do what: the selector's queries (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]

ROLES = ("viewer", "developer", "admin", "outsider")


def _template(app: BusDomain, name: str = "tmpl"):
    return registry.save_template(
        registry.TemplateSpec(
            name=name,
            bus_domain=app,
            process_type_id=ProcessTypeId.GENERIC_JOB,
            steps=[registry.TemplateStepSpec("work", STEP_TYPE)],
        )
    )


def _archived(app: BusDomain):
    from batches.models import ArchiveConsumpQueue

    row = QueueRowFactory(process=StepFactory(parent=JobFactory(bus_domain=app)))
    return ArchiveConsumpQueue.objects.create(
        queue_id=row.pk,
        source_batch=row.source_batch,
        insert_ts=row.insert_ts,
        process=row.process,
        batch_state_id=1,
        batch_marking=row.batch_marking,
    )


def _log(app: BusDomain):
    from processes.models import ProcessLog

    run = InstanceExecFactory(process=JobFactory(bus_domain=app))
    return ProcessLog.objects.create(process=run.process, instance_exec=run, message="hello")


@dataclass
class Resource:
    path: str
    make: Callable[[BusDomain], object]  # a row owned by the application's team
    create: Callable[[BusDomain], dict] | None = None
    change: Callable[[BusDomain], dict] | None = None  # PATCH body
    write: str = "developer"  # least role to create and change
    delete: str | None = None  # least role to delete; None: no delete
    put: bool = False  # changes are whole documents (PUT), not PATCH
    # Created only by an installation superuser (a membership: a team admin invites instead),
    # refused before the body is read, so an outsider learns nothing either.
    superuser_creates: bool = False
    extra: dict = field(default_factory=dict)


RESOURCES = {
    "applications": Resource(
        "applications",
        make=lambda app: BusDomainFactory(team=app.team),
        create=lambda app: {"name": "new_app", "team": app.team_id},
        change=lambda app: {"description": "changed"},
        delete="admin",
    ),
    "processes": Resource(
        "processes",
        make=lambda app: JobFactory(bus_domain=app),
        create=lambda app: {"name": "new_job", "bus_domain": app.pk, "process_type": 5},
        change=lambda app: {"description": "changed"},
        delete="admin",
    ),
    "properties": Resource(
        "properties",
        make=lambda app: PropertyFactory(process=StepFactory(parent=JobFactory(bus_domain=app))),
        create=lambda app: {
            "process": StepFactory(parent=JobFactory(bus_domain=app)).pk,
            "config_group": "options",
            "key": "executor_memory",
            "value": "2g",
        },
        change=lambda app: {"value": "4g"},
        delete="developer",
    ),
    "templates": Resource(
        "templates",
        make=lambda app: _template(app),
        create=lambda app: {
            "name": "new_tmpl",
            "application": app.name,
            "process_type": "generic-job",
            "steps": [{"name": "a", "process_type": "python-callable"}],
        },
        change=lambda app: {
            "name": "tmpl",
            "application": app.name,
            "process_type": 5,
            "steps": [{"name": "b", "process_type": 51}],
        },
        delete="developer",
        put=True,
    ),
    "servers": Resource(
        "servers",
        make=lambda app: ServerFactory(team=app.team),
        create=lambda app: {"team": app.team_id, "server_type": "s3", "name": "lake"},
        change=lambda app: {"metainfo": "https://s3.example"},
        write="admin",
        delete="admin",
    ),
    "memberships": Resource(
        "memberships",
        make=lambda app: MembershipFactory(team=app.team, user=UserFactory(username="member")),
        create=lambda app: {
            "user": UserFactory(username="newcomer").username,
            "team": app.team_id,
            "role": "viewer",
        },
        change=lambda app: {"role": "developer"},
        write="admin",
        delete="admin",
        superuser_creates=True,
    ),
    "runs": Resource(
        "runs", make=lambda app: InstanceExecFactory(process=JobFactory(bus_domain=app))
    ),
    "logs": Resource("logs", make=_log),
    "batches": Resource("batches", make=lambda app: BatchFactory(bus_domain=app)),
    "queue": Resource(
        "queue",
        make=lambda app: QueueRowFactory(process=StepFactory(parent=JobFactory(bus_domain=app))),
    ),
    "archive": Resource("archive", make=_archived),
    "files": Resource("files", make=lambda app: FileFactory(batch=BatchFactory(bus_domain=app))),
}
WRITABLE = [name for name, r in RESOURCES.items() if r.create]
RANK = {"viewer": 1, "developer": 2, "admin": 3}


def allowed(role: str, least: str) -> bool:
    return role != "outsider" and RANK[role] >= RANK[least]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("name", list(RESOURCES))
def test_a_list_shows_only_the_rows_of_the_users_teams(team, name, who):
    resource = RESOURCES[name]
    ours = resource.make(team.application)
    theirs = resource.make(team.other_application)
    response = api_as(getattr(team, who)).get(f"/api/v1/{resource.path}/")
    assert response.status_code == 200
    body = response.json()
    ids = {row["id"] for row in body["results"]}
    assert body["count"] == len(body["results"])  # paginated with a total count
    assert (ours.pk in ids) is (who != "outsider")
    assert (theirs.pk in ids) is (who == "outsider")


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("name", list(RESOURCES))
def test_another_teams_row_is_not_found(team, name, who):
    resource = RESOURCES[name]
    row = resource.make(team.application)
    response = api_as(getattr(team, who)).get(f"/api/v1/{resource.path}/{row.pk}/")
    assert response.status_code == (404 if who == "outsider" else 200)


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("name", WRITABLE)
def test_create_needs_the_write_role_in_the_team(team, name, who):
    resource = RESOURCES[name]
    response = api_as(getattr(team, who)).post(
        f"/api/v1/{resource.path}/", resource.create(team.application), format="json"
    )
    if resource.superuser_creates:
        assert response.status_code == 403, response.content
    elif who == "outsider":
        # The outsider names a row of a team he is not in: it does not exist for him.
        assert response.status_code == 400, response.content
    else:
        expected = 201 if allowed(who, resource.write) else 403
        assert response.status_code == expected, response.content


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("name", WRITABLE)
def test_change_needs_the_write_role_in_the_team(team, name, who):
    resource = RESOURCES[name]
    row = resource.make(team.application)
    client = api_as(getattr(team, who))
    send = client.put if resource.put else client.patch
    response = send(
        f"/api/v1/{resource.path}/{row.pk}/", resource.change(team.application), format="json"
    )
    if who == "outsider":
        assert response.status_code == 404
    else:
        expected = 200 if allowed(who, resource.write) else 403
        assert response.status_code == expected, response.content


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("name", WRITABLE)
def test_delete_needs_the_delete_role_in_the_team(team, name, who):
    resource = RESOURCES[name]
    row = resource.make(team.application)
    response = api_as(getattr(team, who)).delete(f"/api/v1/{resource.path}/{row.pk}/")
    if who == "outsider":
        assert response.status_code == 404
    else:
        expected = 204 if allowed(who, resource.delete) else 403
        assert response.status_code == expected, response.content
        listed = api_as(team.admin).get(f"/api/v1/{resource.path}/{row.pk}/")
        assert listed.status_code == (404 if expected == 204 else 200)


@pytest.mark.parametrize("name", list(RESOURCES))
def test_anonymous_gets_401(team, name):
    from rest_framework.test import APIClient

    assert APIClient().get(f"/api/v1/{RESOURCES[name].path}/").status_code == 401
