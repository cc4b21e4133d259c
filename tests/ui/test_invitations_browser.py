"""Memberships by consent in a real browser: a team admin invites a user by name
on the team's page; the user finds the invitation from the navigation's Teams link, accepts
it, and is a member; nothing before. Screenshots go to ``var/screenshots/``
(``invite-*.png``)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bdre import teams as services
from bdre.models import Membership, Role
from tests.helpers.browser import log_in, shot

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def test_an_invited_user_joins_the_team_only_when_he_accepts_in_the_browser(
    team, live_server, browser
):
    admin = log_in(browser, live_server, team.admin)
    admin.goto(f"{live_server.url}/teams/{team.group.pk}/")
    admin.fill("input#id_username", team.outsider.username)
    admin.select_option("select#id_role", Role.DEVELOPER.value)
    admin.click("button:text('Invite')")
    # The click returns once the next page starts loading: assertions that wait for it.
    expect(admin.locator("body")).to_contain_text(services.INVITATION_SENT)
    expect(admin.locator("table").nth(1)).to_contain_text(team.outsider.username)
    shot(admin, "invite-sent")
    assert not Membership.objects.filter(user=team.outsider, team=team.group).exists()

    invited = log_in(browser, live_server, team.outsider)
    invited.click("nav >> text=Teams")
    invitations = invited.locator("section[aria-labelledby=invitations]")
    assert "analytics" in invitations.inner_text()
    shot(invited, "invite-waiting")
    invitations.locator("button:text('Accept')").click()
    expect(invited.locator("body")).to_contain_text("You joined analytics as developer.")
    expect(invited.locator("section[aria-labelledby=invitations]")).to_have_count(0)
    shot(invited, "invite-accepted")
    membership = Membership.objects.get(user=team.outsider, team=team.group)
    assert membership.role == Role.DEVELOPER
