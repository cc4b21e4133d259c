"""Teams, memberships and master tables through REST."""

from __future__ import annotations

import pytest

from bdre.models import Membership, Role
from tests.helpers.api import api_as
from tests.helpers.factories import UserFactory

# backends: memberships: constraints and the selector's queries (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


def test_a_user_sees_his_teams_with_his_role(team):
    body = api_as(team.developer).get("/api/v1/teams/").json()
    assert [(t["name"], t["my_role"], t["members"]) for t in body["results"]] == [
        ("analytics", "developer", 3)
    ]
    assert api_as(team.outsider).get(f"/api/v1/teams/{team.group.pk}/").status_code == 404


def test_staff_create_a_team_and_become_its_admin(team):
    team.developer.is_staff = True
    team.developer.save()
    response = api_as(team.developer).post("/api/v1/teams/", {"name": "finance"}, format="json")
    assert response.status_code == 201
    assert response.json()["my_role"] == "admin"
    assert api_as(team.viewer).post("/api/v1/teams/", {"name": "x"}).status_code == 403


def test_only_a_teams_staff_admin_renames_it(team):
    path = f"/api/v1/teams/{team.group.pk}/"
    assert api_as(team.developer).patch(path, {"name": "x"}, format="json").status_code == 403
    assert api_as(team.admin).patch(path, {"name": "bi"}, format="json").status_code == 403
    team.admin.is_staff = True
    team.admin.save()
    assert api_as(team.admin).patch(path, {"name": "bi"}, format="json").status_code == 200


def test_naming_a_team_like_another_reveals_nothing_to_who_may_not_name_teams(team):
    """Team names are unique in the installation: "a group with this name already exists"
    would tell a team's admin, or anyone, the names of teams he is not in. Who may
    not name teams is refused before the name is looked at, taken or not."""
    path = f"/api/v1/teams/{team.group.pk}/"
    for name in (team.other_group.name, "free-name"):
        renamed = api_as(team.admin).patch(path, {"name": name}, format="json")
        created = api_as(team.viewer).post("/api/v1/teams/", {"name": name}, format="json")
        assert (renamed.status_code, created.status_code) == (403, 403)
        assert "exists" not in renamed.content.decode() + created.content.decode()


def test_a_team_keeps_at_least_one_admin(team):
    mine = Membership.objects.get(user=team.admin, team=team.group)
    admin = api_as(team.admin)
    demoted = admin.patch(f"/api/v1/memberships/{mine.pk}/", {"role": "viewer"}, format="json")
    assert demoted.status_code == 400
    assert "at least one admin" in demoted.json()["role"][0]
    assert admin.delete(f"/api/v1/memberships/{mine.pk}/").status_code == 400
    assert Membership.objects.get(pk=mine.pk).role == Role.ADMIN


def test_a_superuser_adds_a_member_once_and_a_team_admin_not_at_all(team, superuser):
    UserFactory(username="newbie")
    body = {"user": "newbie", "team": team.group.pk, "role": "developer"}
    # A team admin invites instead (tests/bdre/test_invitations.py), refused before the name
    # is looked up: the answer is the same for a user and for nobody.
    for name in ("newbie", "ghost"):
        refused = api_as(team.admin).post("/api/v1/memberships/", {**body, "user": name})
        assert refused.status_code == 403
        assert "invites" in refused.json()["detail"]
    root = api_as(superuser)
    assert root.post("/api/v1/memberships/", body, format="json").status_code == 201
    again = root.post("/api/v1/memberships/", body, format="json")
    assert again.status_code == 400
    unknown = root.post("/api/v1/memberships/", {**body, "user": "ghost"}, format="json")
    assert "user" in unknown.json()


@pytest.mark.parametrize(
    ("table", "first"),
    [
        ("exec-statuses", (1, "NOT_RUNNING")),
        ("batch-statuses", (0, "NEW")),
        ("process-types", (1, "ingestion-job")),
        ("workflow-types", (0, "steps")),
        ("lineage-node-types", (1, "table")),
        ("lineage-query-types", (1, "hive")),
    ],
)
def test_master_tables_are_read_only(team, table, first):
    client = api_as(team.viewer)
    rows = client.get(f"/api/v1/master/{table}/").json()
    assert (rows[0]["id"], rows[0]["name"]) == first
    assert client.post(f"/api/v1/master/{table}/", {"id": 99, "name": "x"}).status_code == 405
