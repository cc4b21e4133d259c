"""The job's page shows the alerts sent about it."""

from __future__ import annotations

import pytest

from tests.helpers.alerts import alerting, fail_once

pytestmark = pytest.mark.django_db


def test_the_job_page_shows_the_alert_sent_to_its_team(
    client, team, make_job, smtp, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders", max_retries=10), email="ops@example.com")
    client.force_login(team.viewer)
    assert "No alert sent." in client.get(f"/jobs/{job.pk}/").content.decode()

    run = fail_once(job, "boom", django_capture_on_commit_callbacks)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    section = page[page.index('<h2 id="alerts">Alerts</h2>') :]
    section = section[: section.index("</table>")]
    assert f'<a href="/runs/{run}/">[BDRE] orders: run {run} failed</a>' in section
    assert "ops@example.com" in section and ">sent</span>" in section
    assert "run failed" in section


def test_an_outsider_gets_no_job_page_and_so_no_alerts(
    client, team, make_job, smtp, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders", max_retries=10), email="ops@example.com")
    fail_once(job, "boom", django_capture_on_commit_callbacks)
    client.force_login(team.outsider)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404


def _as(client, user):
    client.force_login(user)
    return client


def test_a_team_admin_adds_and_removes_a_destination_on_the_team_page(
    client, team, make_job, webhook, eager, django_capture_on_commit_callbacks
):
    from alerts.models import Destination

    admin = _as(client, team.admin)
    team_page = admin.get(f"/teams/{team.group.pk}/").content.decode()
    assert f"/teams/{team.group.pk}/alerts/" in team_page
    page = admin.get(f"/teams/{team.group.pk}/alerts/").content.decode()
    assert "No destination yet" in page

    refused = admin.post(
        f"/teams/{team.group.pk}/alerts/",
        {"action": "add", "channel": "webhook", "target": "ftp://x", "kinds": "failure"},
        follow=True,
    ).content.decode()
    assert "http:// or https://" in refused and not Destination.objects.exists()
    added = admin.post(
        f"/teams/{team.group.pk}/alerts/",
        {"action": "add", "channel": "webhook", "target": webhook.url, "kinds": "failure"},
        follow=True,
    )
    assert added.redirect_chain == [(f"/teams/{team.group.pk}/alerts/", 302)]
    destination = Destination.objects.get()
    assert (destination.team_id, destination.kinds) == (team.group.pk, "failure")
    again = admin.post(
        f"/teams/{team.group.pk}/alerts/",
        {"action": "add", "channel": "webhook", "target": webhook.url},
        follow=True,
    ).content.decode()
    assert "has this webhook destination already" in again

    # Every job of the team alerts there; the page lists what was sent.
    job = make_job("orders", max_retries=10)
    run = fail_once(job, "boom", django_capture_on_commit_callbacks)
    assert [p["run"]["id"] for p in webhook.posts] == [run]
    page = admin.get(f"/teams/{team.group.pk}/alerts/").content.decode()
    assert webhook.url in page and f"[BDRE] orders: run {run} failed" in page

    admin.post(
        f"/teams/{team.group.pk}/alerts/", {"action": "remove", "destination": destination.pk}
    )
    assert not Destination.objects.exists()


@pytest.mark.parametrize(
    ("who", "status"), [("viewer", 403), ("developer", 403), ("outsider", 404)]
)
def test_only_the_teams_admins_change_its_destinations(client, team, who, status):
    from alerts.models import Destination

    kept = Destination.objects.create(team=team.group, channel="email", target="ops@example.com")
    user = _as(client, getattr(team, who))
    page = user.get(f"/teams/{team.group.pk}/alerts/")
    assert page.status_code == (404 if who == "outsider" else 200)
    if who != "outsider":
        assert "ops@example.com" in page.content.decode()
        assert 'name="action" value="add"' not in page.content.decode()
    add = {"action": "add", "channel": "email", "target": "evil@example.com"}
    assert user.post(f"/teams/{team.group.pk}/alerts/", add).status_code == status
    remove = {"action": "remove", "destination": kept.pk}
    assert user.post(f"/teams/{team.group.pk}/alerts/", remove).status_code == status
    assert list(Destination.objects.values_list("target", flat=True)) == ["ops@example.com"]
