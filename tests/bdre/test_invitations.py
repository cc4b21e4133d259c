"""Memberships by consent: a team admin invites, the user accepts or
declines; the answer to an invitation never tells whether a user name exists; and a user in
several teams registers in each with its own names. Each test is the attack, through the API
and the pages, as the team fixture's users (viewer, developer, admin of "analytics"; the
outsider, a developer of "marketing")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from bdre import teams as services
from bdre.models import Invitation, Membership, Role
from processes.models import Process, ProcessTemplate
from tests.helpers.api import api_as
from tests.helpers.factories import BusDomainFactory, MembershipFactory
from tests.helpers.jobs import build_job
from tests.helpers.pages import client_as

# backends: an invitation accepted once: constraints (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]

INVITE = "/api/v1/invitations/"


def _invite(team, username: str, role: str = "developer", by=None):
    body = {"team": team.group.pk, "username": username, "role": role}
    return api_as(by or team.admin).post(INVITE, body, format="json")


def _member(user, group) -> bool:
    return Membership.objects.filter(user=user, team=group).exists()


def _invitation_of(team, user) -> Invitation:
    return Invitation.objects.get(team=team.group, username=user.username)


# --- nobody is made a member without consent ------------------------------------------------


def test_a_team_admin_cannot_add_a_user_of_another_team_directly(team):
    """The attack: the admin of team A puts the outsider (of team B) into his team."""
    body = {"user": team.outsider.username, "team": team.group.pk, "role": "admin"}
    api = api_as(team.admin).post("/api/v1/memberships/", body, format="json")
    page = client_as(team.admin).post(
        f"/teams/{team.group.pk}/",
        {"action": "add", "username": team.outsider.username, "role": "admin"},
    )
    assert (api.status_code, page.status_code) == (403, 403)
    assert not _member(team.outsider, team.group)


def test_an_invited_user_is_no_member_until_he_accepts(team):
    assert _invite(team, team.outsider.username).status_code == 202
    assert not _member(team.outsider, team.group)
    mine = api_as(team.outsider).get(INVITE).json()["results"]
    assert [(i["team_name"], i["username"], i["role"], i["invited_by"]) for i in mine] == [
        ("analytics", "outsider", "developer", "admin")
    ]
    accepted = api_as(team.outsider).post(f"{INVITE}{mine[0]['id']}/accept/")
    assert accepted.status_code == 201, accepted.content
    assert Membership.objects.get(user=team.outsider, team=team.group).role == Role.DEVELOPER
    assert not Invitation.objects.exists()
    again = api_as(team.outsider).post(f"{INVITE}{mine[0]['id']}/accept/")
    assert again.status_code == 404


def test_a_declined_invitation_makes_no_member_and_is_gone(team):
    _invite(team, team.outsider.username)
    invitation = _invitation_of(team, team.outsider)
    declined = api_as(team.outsider).post(f"{INVITE}{invitation.pk}/decline/")
    assert declined.status_code == 204
    assert not _member(team.outsider, team.group)
    assert not Invitation.objects.exists()
    assert api_as(team.outsider).post(f"{INVITE}{invitation.pk}/accept/").status_code == 404


@pytest.mark.parametrize("who", ["viewer", "developer", "admin"])
def test_nobody_but_the_invited_user_accepts_or_declines_his_invitation(team, superuser, who):
    _invite(team, team.outsider.username, role="admin")
    invitation = _invitation_of(team, team.outsider)
    for user in (getattr(team, who), superuser):
        for answer in ("accept", "decline"):
            response = api_as(user).post(f"{INVITE}{invitation.pk}/{answer}/")
            assert response.status_code == 404, (user, answer)
        page = client_as(user).post("/teams/", {"action": "accept", "invitation": invitation.pk})
        assert page.status_code == 404
    assert not _member(team.outsider, team.group)
    assert Invitation.objects.filter(pk=invitation.pk).exists()
    assert Membership.objects.get(user=team.viewer, team=team.group).role == Role.VIEWER


# --- the answer tells no user name ----------------------------------------------------------


def test_the_answer_to_an_invitation_is_the_same_whether_the_name_exists_or_not(team):
    """The attack: "does not exist" against 201 told the admin which user names exist."""
    names = [team.outsider.username, "ghost-of-nobody", team.viewer.username]
    answers = [_invite(team, name) for name in names]
    assert {(a.status_code, a.content) for a in answers} == {
        (202, b'{"detail":"%s"}' % services.INVITATION_SENT.encode())
    }
    pages = [
        client_as(team.admin).post(
            f"/teams/{team.group.pk}/",
            {"action": "invite", "username": name, "role": "viewer"},
            follow=True,
        )
        for name in names
    ]
    shown = [p.content.decode().replace(n, "NAME") for p, n in zip(pages, names, strict=True)]
    assert all(services.INVITATION_SENT in text for text in shown)
    # The team's pending invitations list every name alike, whoever holds it.
    assert sorted(Invitation.objects.values_list("username", flat=True)) == sorted(names)
    assert {str(i.role) for i in Invitation.objects.all()} == {"viewer"}  # renewed, not added


def test_naming_a_team_one_is_not_in_is_answered_as_a_team_of_no_id(team):
    theirs = {"team": team.other_group.pk, "username": "viewer", "role": "admin"}
    nobody = {**theirs, "team": team.other_group.pk + 1000}
    answers = [api_as(team.admin).post(INVITE, body, format="json") for body in (theirs, nobody)]
    assert [a.status_code for a in answers] == [400, 400]
    texts = [
        a.json()["team"][0].replace(str(b["team"]), "ID")
        for a, b in zip(answers, (theirs, nobody), strict=True)
    ]
    assert texts[0] == texts[1]
    assert not Invitation.objects.exists()


@pytest.mark.parametrize("who", ["viewer", "developer"])
def test_only_a_teams_admin_invites(team, who):
    response = _invite(team, "someone", by=getattr(team, who))
    page = client_as(getattr(team, who)).post(
        f"/teams/{team.group.pk}/", {"action": "invite", "username": "someone", "role": "admin"}
    )
    assert (response.status_code, page.status_code) == (403, 403)
    assert not Invitation.objects.exists()


# --- the admin's side -----------------------------------------------------------------------


def test_a_teams_members_see_its_pending_invitations_and_its_admin_cancels_them(team):
    _invite(team, "nora")
    invitation = Invitation.objects.get(username="nora")
    seen = api_as(team.viewer).get(INVITE, {"team": team.group.pk}).json()["results"]
    assert [i["username"] for i in seen] == ["nora"]
    assert api_as(team.outsider).get(f"{INVITE}{invitation.pk}/").status_code == 404
    assert api_as(team.outsider).get(INVITE).json()["results"] == []
    assert api_as(team.viewer).delete(f"{INVITE}{invitation.pk}/").status_code == 403
    assert api_as(team.outsider).delete(f"{INVITE}{invitation.pk}/").status_code == 404
    assert api_as(team.admin).delete(f"{INVITE}{invitation.pk}/").status_code == 204
    assert not Invitation.objects.exists()


def test_the_team_page_lists_pending_invitations_and_its_admin_cancels_one(team):
    _invite(team, "nora")
    invitation = Invitation.objects.get(username="nora")
    page = client_as(team.viewer).get(f"/teams/{team.group.pk}/").content.decode()
    assert "Pending invitations" in page and "nora" in page and "Invite a member" not in page
    admin = client_as(team.admin)
    assert "Invite a member" in admin.get(f"/teams/{team.group.pk}/").content.decode()
    refused = client_as(team.viewer).post(
        f"/teams/{team.group.pk}/", {"action": "cancel", "invitation": invitation.pk}
    )
    assert refused.status_code == 403
    done = admin.post(
        f"/teams/{team.group.pk}/", {"action": "cancel", "invitation": invitation.pk}, follow=True
    )
    assert "The invitation of nora is cancelled." in done.content.decode()
    assert not Invitation.objects.exists()


def test_a_cancelled_invitation_cannot_be_accepted(team):
    _invite(team, team.outsider.username)
    invitation = _invitation_of(team, team.outsider)
    services.cancel_invitation(invitation.pk, by=team.admin)
    assert api_as(team.outsider).post(f"{INVITE}{invitation.pk}/accept/").status_code == 404
    assert not _member(team.outsider, team.group)


def test_a_member_invited_again_is_told_so_when_accepting_and_keeps_his_role(team):
    _invite(team, team.viewer.username, role="admin")
    invitation = _invitation_of(team, team.viewer)
    answer = api_as(team.viewer).post(f"{INVITE}{invitation.pk}/accept/")
    assert answer.status_code == 400
    assert "member of analytics already" in str(answer.json())
    assert Membership.objects.get(user=team.viewer, team=team.group).role == Role.VIEWER


def test_an_invitation_expires_after_the_days_the_setting_gives(team, settings):
    settings.BDRE_INVITATION_DAYS = 3
    _invite(team, team.outsider.username)
    invitation = _invitation_of(team, team.outsider)
    left = invitation.expires_at - timezone.now()
    assert timedelta(days=3) - timedelta(minutes=1) < left <= timedelta(days=3)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now())
    assert api_as(team.outsider).get(INVITE).json()["results"] == []
    assert api_as(team.outsider).post(f"{INVITE}{invitation.pk}/accept/").status_code == 404
    assert "outsider" not in client_as(team.viewer).get(f"/teams/{team.group.pk}/").content.decode()
    assert not _member(team.outsider, team.group)


# --- the invited user's page ----------------------------------------------------------------


def test_the_invited_user_accepts_on_his_teams_page(team):
    _invite(team, team.outsider.username, role="viewer")
    client = client_as(team.outsider)
    waiting = 'title="invitations waiting for your answer">1</span>'
    assert waiting in client.get("/").content.decode()  # beside the navigation's Teams link
    page = client.get("/teams/").content.decode()
    assert "Invitations for you" in page and "analytics" in page
    invitation = _invitation_of(team, team.outsider)
    done = client.post("/teams/", {"action": "accept", "invitation": invitation.pk}, follow=True)
    assert "You joined analytics as viewer." in done.content.decode()
    assert "invitations waiting" not in done.content.decode()
    assert Membership.objects.get(user=team.outsider, team=team.group).role == Role.VIEWER


def test_the_invited_user_declines_on_his_teams_page(team):
    _invite(team, team.outsider.username)
    invitation = _invitation_of(team, team.outsider)
    client = client_as(team.outsider)
    done = client.post("/teams/", {"action": "decline", "invitation": invitation.pk}, follow=True)
    assert "Invitation declined." in done.content.decode()
    assert "Invitations for you" not in done.content.decode()
    assert not _member(team.outsider, team.group)


def test_a_malformed_invitation_id_is_a_404(team):
    answer = client_as(team.outsider).post("/teams/", {"action": "accept", "invitation": "1x"})
    assert answer.status_code == 404


# --- a superuser adds directly --------------------------------------------------------------


def test_a_superuser_adds_a_member_directly(team, superuser):
    body = {"user": team.outsider.username, "team": team.group.pk, "role": "developer"}
    assert api_as(superuser).post("/api/v1/memberships/", body, format="json").status_code == 201
    assert _member(team.outsider, team.group)
    other = MembershipFactory(team=team.other_group, role=Role.VIEWER).user
    page = client_as(superuser)
    assert "Add a member directly" in page.get(f"/teams/{team.group.pk}/").content.decode()
    page.post(
        f"/teams/{team.group.pk}/", {"action": "add", "username": other.username, "role": "viewer"}
    )
    assert _member(other, team.group)


# --- names resolve within the team the request is about -------------------------------------


def _pipeline(application: str, name: str, team: str | None = None) -> dict:
    document = {
        "name": name,
        "application": application,
        "process_type": "generic-job",
        "steps": [{"name": f"{name}_s1", "process_type": "python-callable"}],
    }
    return {**document, "team": team} if team is not None else document


def test_joining_a_second_team_does_not_break_registering_in_the_first(team):
    """The attack: the developer of team A is invited into team B, which has an application
    named like his own team's ("web"); he accepts, and registers in team A as before, naming
    his team."""
    their_admin = MembershipFactory(team=team.other_group, role=Role.ADMIN).user
    BusDomainFactory(name="web", team=team.other_group)
    body = {"team": team.other_group.pk, "username": "developer", "role": "developer"}
    assert api_as(their_admin).post(INVITE, body, format="json").status_code == 202
    invitation = Invitation.objects.get(username="developer")
    assert api_as(team.developer).post(f"{INVITE}{invitation.pk}/accept/").status_code == 201
    dev = api_as(team.developer)
    for named, job in (("analytics", "clicks"), (team.group.pk, "views")):
        response = dev.post(
            "/api/v1/processes/pipeline/", _pipeline("web", job, named), format="json"
        )
        assert response.status_code == 201, response.content
        assert Process.objects.get(pk=response.json()["id"]).bus_domain == team.application
    # Naming no team, the name is still two of his teams': he is asked which.
    ambiguous = dev.post("/api/v1/processes/pipeline/", _pipeline("web", "hits"), format="json")
    assert ambiguous.status_code == 400
    assert 'give its id or the team ("team")' in ambiguous.json()["application"][0]


def test_upstream_jobs_and_templates_resolve_within_the_named_team(team):
    MembershipFactory(user=team.developer, team=team.other_group, role=Role.DEVELOPER)
    BusDomainFactory(name="web", team=team.other_group)
    ours = build_job(team, "orders")
    build_job(team.other_application, "orders")
    dev = api_as(team.developer)
    document = _pipeline("web", "report", "analytics")
    document["steps"][0]["upstream"] = ["orders"]
    response = dev.post("/api/v1/processes/pipeline/", document, format="json")
    assert response.status_code == 201, response.content
    assert list(Process.objects.get(name="report_s1").enqueuing_processes.all()) == [ours]
    template = {
        "name": "daily",
        "application": "web",
        "team": "analytics",
        "process_type": "generic-job",
        "steps": [{"name": "work", "process_type": "python-callable"}],
    }
    created = dev.post("/api/v1/templates/", template, format="json")
    assert created.status_code == 201, created.content
    assert ProcessTemplate.objects.get(pk=created.json()["id"]).bus_domain == team.application
    made = dev.post(
        f"/api/v1/templates/{created.json()['id']}/instantiate/",
        {"name": "daily_one", "team": "analytics", "upstream": {"work": ["orders"]}},
        format="json",
    )
    assert made.status_code == 201, made.content


def test_a_team_one_is_not_in_is_an_unknown_team_in_a_document(team):
    dev = api_as(team.developer)
    answers = [
        dev.post("/api/v1/processes/pipeline/", _pipeline("web", "x", named), format="json")
        for named in ("marketing", "no-such-team")
    ]
    assert [a.status_code for a in answers] == [400, 400]
    texts = [a.json()["team"][0] for a in answers]
    assert texts == ["Unknown team 'marketing'.", "Unknown team 'no-such-team'."]
