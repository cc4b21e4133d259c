"""The job's page shows the alerts sent about it."""

from __future__ import annotations

import pytest

from tests.alerts.conftest import alerting
from tests.alerts.test_services import fail_once

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
