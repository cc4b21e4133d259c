"""The one selector: what each kind of user sees and may do."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser

from batches.models import BatchConsumpQueue, File
from bdre.access import can, role_in, scope, team_of, teams
from bdre.models import Role
from lineage.models import LineageNode
from processes.models import BusDomain, InstanceExec, Process, Server
from tests.helpers.factories import (
    BatchFactory,
    FileFactory,
    InstanceExecFactory,
    JobFactory,
    LineageNodeFactory,
    LineageRelationFactory,
    QueueRowFactory,
    ServerFactory,
    StepFactory,
    UserFactory,
)

# backends: the one selector, scope(), is queries (docs/testing.md).
pytestmark = pytest.mark.backends


@pytest.fixture
def world(team):
    """The same objects in both teams."""
    objects = {}
    for key, app in (("mine", team.application), ("theirs", team.other_application)):
        job = JobFactory(bus_domain=app)
        step = StepFactory(parent=job)
        objects[key] = {
            "job": job,
            "step": step,
            "run": InstanceExecFactory(process=job),
            "queue": QueueRowFactory(process=step),
            "file": FileFactory(batch=BatchFactory(bus_domain=app)),
            "server": ServerFactory(team=app.team),
            "relation": LineageRelationFactory(query__process=step),
        }
    return objects


MODELS = [
    (BusDomain, None),
    (Process, "job"),
    (InstanceExec, "run"),
    (BatchConsumpQueue, "queue"),
    (File, "file"),
    (Server, "server"),
]


@pytest.mark.parametrize("role", ["viewer", "developer", "admin"])
@pytest.mark.parametrize("model,key", MODELS)
def test_team_members_see_only_their_teams_rows(team, world, role, model, key):
    visible = scope(getattr(team, role), model.objects.all())
    if key is None:
        assert list(visible) == [team.application]
    else:
        assert world["mine"][key] in visible
        assert world["theirs"][key] not in visible
        assert all(team_of(obj) == team.group for obj in visible)


@pytest.mark.parametrize("model,key", MODELS)
def test_outsider_sees_only_his_own_team(team, world, model, key):
    visible = scope(team.outsider, model.objects.all())
    assert all(team_of(obj) == team.other_group for obj in visible)
    if key is not None:
        assert world["mine"][key] not in visible
        assert world["theirs"][key] in visible


def test_processes_of_the_team_include_jobs_and_steps(team, world):
    visible = set(scope(team.viewer, Process.objects.all()))
    assert visible == {world["mine"]["job"], world["mine"]["step"]}


def test_min_role_filters_by_rank(team, world):
    job = world["mine"]["job"]
    qs = Process.objects.filter(pk=job.pk)
    assert not scope(team.viewer, qs, Role.DEVELOPER).exists()
    assert scope(team.developer, qs, Role.DEVELOPER).exists()
    assert not scope(team.developer, qs, Role.ADMIN).exists()
    assert scope(team.admin, qs, Role.ADMIN).exists()
    assert not scope(team.outsider, qs, Role.VIEWER).exists()


@pytest.mark.parametrize(
    "role,view,develop,administer",
    [
        ("viewer", True, False, False),
        ("developer", True, True, False),
        ("admin", True, True, True),
        ("outsider", False, False, False),
    ],
)
def test_can_follows_the_role_in_the_owning_team(team, world, role, view, develop, administer):
    user = getattr(team, role)
    run = world["mine"]["run"]
    assert can(user, run, Role.VIEWER) is view
    assert can(user, run, Role.DEVELOPER) is develop
    assert can(user, run, Role.ADMIN) is administer


def test_superuser_sees_everything(world, superuser):
    assert scope(superuser, Process.objects.all()).count() == Process.objects.count() == 4
    assert can(superuser, world["theirs"]["server"], Role.ADMIN)
    assert role_in(superuser, world["theirs"]["job"].bus_domain.team) == Role.ADMIN


def test_anonymous_and_inactive_users_see_nothing(team, world):
    assert not scope(AnonymousUser(), Process.objects.all()).exists()
    team.admin.is_active = False
    team.admin.save()
    assert not scope(team.admin, Process.objects.all()).exists()
    assert not teams(team.admin).exists()


def test_user_without_membership_sees_nothing(world):
    assert not scope(UserFactory(), Process.objects.all()).exists()


def test_lineage_nodes_are_seen_by_their_team_only(team, world):
    mine = LineageNodeFactory(team=team.group)
    theirs = LineageNodeFactory(team=team.other_group)
    # A query of the team that touches another team's node grants nothing of it.
    LineageRelationFactory(src_node=mine, target_node=theirs, query=world["mine"]["relation"].query)
    both = LineageNode.objects.filter(pk__in=[mine.pk, theirs.pk])
    assert set(scope(team.viewer, both)) == {mine}


def test_a_row_reached_by_several_paths_appears_once(team):
    server = ServerFactory(team=team.group)
    server.granted_teams.add(team.group, team.other_group)
    assert scope(team.viewer, Server.objects.filter(pk=server.pk)).count() == 1
    assert scope(team.outsider, Server.objects.filter(pk=server.pk)).count() == 1


def test_role_in_and_teams(team):
    assert role_in(team.viewer, team.group) == Role.VIEWER
    assert role_in(team.admin, team.group) == Role.ADMIN
    assert role_in(team.outsider, team.group) is None
    assert set(teams(team.developer)) == {team.group}
    assert set(teams(team.viewer, Role.DEVELOPER)) == set()


def test_a_model_without_team_lookup_cannot_be_scoped(team):
    from django.contrib.auth.models import Permission

    with pytest.raises(TypeError, match="no team_lookup"):
        scope(team.viewer, Permission.objects.all())
