"""Bad input to the pages is a message that says what to fix, never a 500; and the pages
answer 403, 404 and 500 with the site's own page, whatever DEBUG is, while the API keeps
answering JSON."""

from __future__ import annotations

import pytest
from django.test import Client

from processes import schedules
from processes.models import Process, ProcessTemplate
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db


def test_saving_a_second_template_from_the_same_job_saves_it(team, pipeline):
    job, _ = pipeline
    client = client_as(team.developer)
    client.post(f"/jobs/{job.pk}/save-template/", {"name": "clicks_daily"})
    answer = client.post(f"/jobs/{job.pk}/save-template/", {"name": "clicks_hourly"}, follow=True)
    assert answer.redirect_chain == [("/templates/", 302)]
    assert "Template clicks_hourly is saved." in answer.content.decode()
    for name in ("clicks_daily", "clicks_hourly"):
        template = ProcessTemplate.objects.get(name=name, parent=None)
        assert sorted(template.steps.values_list("name", flat=True)) == ["load", "report"]


def test_saving_a_template_under_a_taken_name_says_so(team, pipeline):
    job, _ = pipeline
    client = client_as(team.developer)
    client.post(f"/jobs/{job.pk}/save-template/", {"name": "clicks_daily"})
    answer = client.post(f"/jobs/{job.pk}/save-template/", {"name": "clicks_daily"}, follow=True)
    assert answer.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert "A template named clicks_daily exists already." in answer.content.decode()
    assert ProcessTemplate.objects.filter(name="clicks_daily", parent=None).count() == 1


def test_a_job_that_runs_on_its_upstream_is_paused_and_resumed_from_its_page(team, pipeline):
    job, _ = pipeline
    schedules.set_schedule(job.pk, schedules.Schedule(on_upstream=True))
    client = client_as(team.developer)
    assert f"/jobs/{job.pk}/pause/" in client.get(f"/jobs/{job.pk}/").content.decode()
    answer = client.post(f"/jobs/{job.pk}/pause/", follow=True)
    assert answer.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    page = answer.content.decode()
    assert "clicks is paused: no schedule, upstream or replay trigger starts it." in page
    assert f"/jobs/{job.pk}/resume/" in page
    assert schedules.is_paused(job.pk) and schedules.schedule_of(job.pk).on_upstream
    # Editing its schedule keeps it paused.
    client.post(f"/jobs/{job.pk}/schedule/", {"timezone": "UTC", "on_upstream": "on"})
    assert schedules.is_paused(job.pk)
    client.post(f"/jobs/{job.pk}/resume/")
    assert not schedules.is_paused(job.pk)


def test_a_property_group_longer_than_its_column_is_an_error_on_the_step_s_field(team):
    # Kept on SQLite, refused by PostgreSQL at the insert (a 500): the registry checks it.
    data = {
        "application": team.application.pk,
        "name": "orders",
        "job_type": 5,
        "max_retries": 3,
        "lease_seconds": 3600,
        "timezone": "UTC",
        "step-TOTAL_FORMS": 1,
        "step-INITIAL_FORMS": 0,
        "step-0-name": "orders_load",
        "step-0-kind": 51,
        "step-0-properties": f"{'g' * 65}.key = value",
    }
    answer = client_as(team.developer).post("/jobs/new/", data)
    assert answer.status_code == 200
    steps = answer.context["steps"]
    assert steps.forms[0].errors["properties"] == [
        "a config group has at most 64 characters; gggggggggggggggggggg... has 65."
    ]
    assert not Process.objects.filter(name="orders").exists()


def site_page(answer, status: int, heading: str) -> str:
    """The body of an answer drawn in the site's layout, not Django's debug page."""
    html = answer.content.decode()
    assert answer.status_code == status
    assert answer["Content-Type"].startswith("text/html")
    assert '<a class="brand"' in html and f"<h1>{heading}</h1>" in html
    assert "Traceback" not in html and "URLconf" not in html and "django" not in html.lower()
    return html


@pytest.fixture(params=[False, True], ids=["production", "debug"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


def test_an_unknown_page_is_the_site_s_own_404(team, debug):
    html = site_page(client_as(team.viewer).get("/no/such/page/"), 404, "Not found")
    assert "There is nothing here, or it belongs to a team you are not in." in html
    assert "Log out" in html  # the layout of a signed-in user


def test_a_job_of_another_team_is_the_site_s_own_404(team, pipeline, debug):
    job, _ = pipeline
    html = site_page(client_as(team.outsider).get(f"/jobs/{job.pk}/"), 404, "Not found")
    assert "clicks" not in html


def test_a_forbidden_action_is_the_site_s_own_403_with_its_reason(team, pipeline, debug):
    job, _ = pipeline
    answer = client_as(team.viewer).post(f"/jobs/{job.pk}/run/")
    html = site_page(answer, 403, "Not allowed")
    assert "This needs the developer role in analytics." in html


def test_a_server_error_is_the_site_s_own_500(team, monkeypatch, debug):
    from processes.selectors import dashboard

    def broken(jobs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(dashboard, "hourly", broken)
    client = Client(raise_request_exception=False)
    client.force_login(team.viewer)
    html = site_page(client.get("/"), 500, "Server error")
    assert "secret internals" not in html
    assert "Something went wrong on our side; it has been logged." in html


@pytest.mark.parametrize(
    "url", ["/api/v1/no-such-resource/", "/api/v1/processes/999999/", "/api/schema/nothing/"]
)
def test_the_api_still_answers_a_404_as_json(team, debug, url):
    answer = client_as(team.viewer).get(url)
    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json"
    assert set(answer.json()) == {"detail"}


def test_a_form_without_its_csrf_token_is_the_site_s_own_403(team, pipeline, debug):
    job, _ = pipeline
    client = Client(enforce_csrf_checks=True)
    client.force_login(team.developer)
    html = site_page(client.post(f"/jobs/{job.pk}/run/"), 403, "Not allowed")
    assert "The form has expired or came from another site: reload the page" in html
