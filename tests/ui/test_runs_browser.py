"""In a real browser: the dashboard shows a run that failed after the page
was loaded without being reloaded, and its failed-runs tile leads to the runs page, which,
filtered by the job, draws the job's duration trend. Screenshots go to ``var/screenshots/``
(``runs-*.png``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from processes.models import ExecState, Trigger
from tests.helpers.browser import log_in, shot
from tests.helpers.runs import job_run

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def test_the_dashboard_refreshes_itself_and_leads_to_the_runs_and_their_trend(
    team, make_job, live_server, browser
):
    job = make_job("orders")
    start = datetime.now(UTC) - timedelta(hours=12)
    for i in range(24):
        job_run(
            job,
            seconds=40 + 15 * (i % 6) + i,
            trigger=Trigger.SCHEDULE if i % 5 else Trigger.MANUAL,
            start_ts=start + timedelta(minutes=20 * i),
        )
    page = log_in(browser, live_server, team.viewer, viewport=(1100, 800))
    failures = page.locator(".tile", has_text="unresolved failures")
    assert failures.locator("span").inner_text() == "0"

    failed = job_run(
        job, state=ExecState.FAILED, seconds=30, start_ts=datetime.now(UTC) - timedelta(minutes=1)
    )
    # No reload: live.js fetches the dashboard's part again within 10 seconds.
    page.wait_for_function(
        "() => document.querySelector('.tile.bad span')?.textContent === '1'", timeout=20_000
    )
    assert page.locator(f'a[href="/runs/{failed.pk}/"]').count() == 1
    shot(page, "runs-01-dashboard-refreshed")

    page.locator(".tile.bad a").click()
    page.wait_for_url(f"{live_server.url}/runs/?unresolved=true")
    assert page.locator("tbody tr").count() == 1

    page.goto(f"{live_server.url}/runs/?job={job.pk}")
    trend = page.locator('[data-testid="duration-trend"] svg')
    assert trend.get_attribute("aria-label") == "Duration of the last 25 runs of orders"
    assert trend.locator("rect").count() == 25
    assert page.locator("tbody tr").count() == 25
    box = trend.bounding_box()
    assert box is not None and box["width"] <= 1100  # no sideways scrolling
    shot(page, "runs-02-runs-of-a-job")
