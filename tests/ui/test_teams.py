"""Team pages: members read the member list; only the team's admins invite members, change
roles and remove members; only a superuser adds one directly; a team keeps one admin.
Invitations: tests/bdre/test_invitations.py."""

from __future__ import annotations

import pytest

from bdre.models import Invitation, Membership, Role
from tests.helpers.factories import UserFactory
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db


def test_members_see_their_teams_and_the_members(team):
    page = client_as(team.viewer).get("/teams/").content.decode()
    assert "analytics" in page and "marketing" not in page
    members = client_as(team.viewer).get(f"/teams/{team.group.pk}/").content.decode()
    assert "developer" in members and "Add a member" not in members
    assert client_as(team.outsider).get(f"/teams/{team.group.pk}/").status_code == 404


def test_an_admin_changes_the_role_of_a_member_who_accepted_and_removes_him(team):
    newcomer = UserFactory(username="nora")
    client = client_as(team.admin)
    assert "Invite a member" in client.get(f"/teams/{team.group.pk}/").content.decode()
    client.post(
        f"/teams/{team.group.pk}/", {"action": "invite", "username": "nora", "role": "viewer"}
    )
    assert not Membership.objects.filter(user=newcomer, team=team.group).exists()
    invitation = Invitation.objects.get(username="nora", team=team.group)
    client_as(newcomer).post("/teams/", {"action": "accept", "invitation": invitation.pk})
    membership = Membership.objects.get(user=newcomer, team=team.group)
    assert membership.role == Role.VIEWER
    client.post(
        f"/teams/{team.group.pk}/",
        {"action": "role", "membership": membership.pk, "role": "developer"},
    )
    membership.refresh_from_db()
    assert membership.role == Role.DEVELOPER
    client.post(f"/teams/{team.group.pk}/", {"action": "remove", "membership": membership.pk})
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_an_unknown_user_is_said_on_the_field_to_a_superuser_only(team, superuser):
    answer = client_as(superuser).post(
        f"/teams/{team.group.pk}/", {"action": "add", "username": "ghost", "role": "viewer"}
    )
    assert "No active user is named ghost." in answer.content.decode()
    refused = client_as(team.admin).post(
        f"/teams/{team.group.pk}/", {"action": "add", "username": "ghost", "role": "viewer"}
    )
    assert refused.status_code == 403
    assert "ghost" not in refused.content.decode()


def test_the_last_admin_cannot_leave(team):
    mine = Membership.objects.get(user=team.admin, team=team.group)
    answer = client_as(team.admin).post(
        f"/teams/{team.group.pk}/", {"action": "remove", "membership": mine.pk}, follow=True
    )
    assert "keeps at least one admin" in answer.content.decode()
    assert Membership.objects.filter(pk=mine.pk).exists()


@pytest.mark.parametrize("who", ["viewer", "developer"])
def test_a_forged_member_change_is_refused(team, who):
    target = Membership.objects.get(user=team.viewer, team=team.group)
    answer = client_as(getattr(team, who)).post(
        f"/teams/{team.group.pk}/", {"action": "role", "membership": target.pk, "role": "admin"}
    )
    assert answer.status_code == 403
    target.refresh_from_db()
    assert target.role == Role.VIEWER


def test_a_malformed_member_id_is_a_404(team):
    answer = client_as(team.admin).post(
        f"/teams/{team.group.pk}/", {"action": "remove", "membership": "12abc"}
    )
    assert answer.status_code == 404
