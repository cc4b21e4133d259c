"""The alerts list and the team destinations through the API, as each member of a team and
as an outsider."""

from __future__ import annotations

import pytest

from alerts.models import Alert, Destination
from tests.helpers.api import api_as

# backends: the lists' filters: queries (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]

API = "/api/v1"


@pytest.fixture
def sent_alert(team, make_job):
    job = make_job("orders")
    return Alert.objects.create(
        job=job,
        team=team.group,
        kind="failure",
        channel="email",
        destination="ops@example.com",
        subject="[BDRE] orders: run 1 failed",
        status="sent",
    )


@pytest.fixture
def destination(team):
    return Destination.objects.create(team=team.group, channel="email", target="oncall@example.com")


def test_members_list_their_teams_alerts_and_an_outsider_sees_none(team, sent_alert):
    for user in (team.viewer, team.developer, team.admin):
        body = api_as(user).get(f"{API}/alerts/", {"job": sent_alert.job_id}).json()
        assert [a["id"] for a in body["results"]] == [sent_alert.pk]
        assert body["results"][0]["job_name"] == "orders"
    outsider = api_as(team.outsider)
    assert outsider.get(f"{API}/alerts/").json()["results"] == []
    assert outsider.get(f"{API}/alerts/", {"job": sent_alert.job_id}).json()["results"] == []
    assert outsider.get(f"{API}/alerts/{sent_alert.pk}/").status_code == 404


def test_alerts_are_read_only(team, sent_alert):
    admin = api_as(team.admin)
    assert admin.delete(f"{API}/alerts/{sent_alert.pk}/").status_code == 405
    assert admin.post(f"{API}/alerts/", {}).status_code == 405


def test_a_team_admin_adds_and_removes_a_destination(team):
    admin = api_as(team.admin)
    created = admin.post(
        f"{API}/alert-destinations/",
        {"team": team.group.pk, "channel": "webhook", "target": "https://hooks.example.com/x"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    assert (
        admin.patch(
            f"{API}/alert-destinations/{pk}/", {"kinds": "failure,sla"}, format="json"
        ).json()["kinds"]
        == "failure,sla"
    )
    assert admin.delete(f"{API}/alert-destinations/{pk}/").status_code == 204
    assert not Destination.objects.exists()


def test_a_viewer_and_a_developer_read_destinations_but_cannot_change_them(team, destination):
    for user in (team.viewer, team.developer):
        client = api_as(user)
        assert [d["id"] for d in client.get(f"{API}/alert-destinations/").json()["results"]] == [
            destination.pk
        ]
        body = {"team": team.group.pk, "channel": "email", "target": "me@example.com"}
        assert client.post(f"{API}/alert-destinations/", body, format="json").status_code == 403
        assert (
            client.patch(
                f"{API}/alert-destinations/{destination.pk}/", {"kinds": "sla"}, format="json"
            ).status_code
            == 403
        )
        assert client.delete(f"{API}/alert-destinations/{destination.pk}/").status_code == 403
    destination.refresh_from_db()
    assert destination.kinds == ""


def test_an_outsider_neither_sees_nor_touches_another_teams_destinations(team, destination):
    client = api_as(team.outsider)
    assert client.get(f"{API}/alert-destinations/").json()["results"] == []
    url = f"{API}/alert-destinations/{destination.pk}/"
    assert client.get(url).status_code == 404
    assert client.patch(url, {"target": "me@evil.example"}, format="json").status_code == 404
    assert client.delete(url).status_code == 404
    answer = client.post(
        f"{API}/alert-destinations/",
        {"team": team.group.pk, "channel": "email", "target": "me@evil.example"},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json() == {"team": [f'Invalid pk "{team.group.pk}" - object does not exist.']}
    assert list(Destination.objects.values_list("target", flat=True)) == ["oncall@example.com"]


@pytest.mark.parametrize(
    ("channel", "target", "kinds", "field", "says"),
    [
        ("webhook", "file:///etc/passwd", "", "target", "is not an http:// or https:// URL"),
        ("webhook", "gopher://example.com/", "", "target", "is not an http:// or https:// URL"),
        ("webhook", "https://user:pw@example.com/", "", "target", "put no user or password"),
        ("email", "not an address", "", "target", "is not an e-mail address"),
        ("email", "ops@example.com", "failure,boom", "kinds", "boom is not a kind of alert"),
        ("sms", "+331234", "", "channel", "is not a valid choice"),
    ],
)
def test_a_destination_is_checked_before_it_is_saved(team, channel, target, kinds, field, says):
    answer = api_as(team.admin).post(
        f"{API}/alert-destinations/",
        {"team": team.group.pk, "channel": channel, "target": target, "kinds": kinds},
        format="json",
    )
    assert answer.status_code == 400
    assert says in answer.json()[field][0]
    assert not Destination.objects.exists()


def test_the_same_destination_twice_is_refused_in_words(team, destination):
    answer = api_as(team.admin).post(
        f"{API}/alert-destinations/",
        {"team": team.group.pk, "channel": "email", "target": "oncall@example.com"},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json() == {"target": [f"Team {team.group} has this email destination already."]}
