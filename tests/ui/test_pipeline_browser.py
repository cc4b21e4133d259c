"""In a real browser: from the dashboard to the pipeline in one click, the jobs upstream to
downstream coloured by their last runs, and on to a job, at desktop and phone width.
Screenshots go to ``var/screenshots/`` (``pipeline-*.png``)."""

from __future__ import annotations

import pytest

from tests.helpers.browser import OVERFLOW, log_in, shot
from tests.helpers.lifecycle import run_job, steps_of

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


@pytest.mark.parametrize("width", [1366, 390])
def test_a_viewer_opens_the_pipeline_from_the_dashboard_and_follows_a_failed_job(
    team, make_job, live_server, browser, width
):
    ingest = make_job("ingest", steps=1)
    shred = make_job("shred", steps=1, upstream=[ingest])
    daily = make_job("daily", steps=1, upstream=[shred])
    export = make_job("export", steps=1, upstream=[daily])
    for job in (ingest, shred, ingest):
        run_job(job, max_batch=10**9)
    run_job(daily, max_batch=10**9, fail_step=steps_of(daily)[0])

    page = log_in(browser, live_server, team.viewer, viewport=(width, 900))
    page.get_by_role("link", name="as a pipeline").click()
    page.wait_for_url(f"{live_server.url}/pipeline/")
    assert page.get_by_role("heading", name="Pipeline").is_visible()
    states = {
        node.get_attribute("data-id"): node.get_attribute("data-state")
        for node in page.locator("svg g.node").all()
    }
    assert states == {
        f"p{ingest.pk}": "SUCCESS",
        f"p{shred.pk}": "SUCCESS",
        f"p{daily.pk}": "FAILED",
        f"p{export.pk}": "NOT RUN",
    }
    assert page.locator("svg text.edge-label", has_text="1 in 24 h · 1 waiting").is_visible()
    assert page.evaluate(OVERFLOW) <= 0, "no sideways scroll: the graph scrolls in its box"
    shot(page, f"pipeline-{width}")
    page.locator(f'svg g.node[data-id="p{daily.pk}"]').click()
    page.wait_for_url(f"{live_server.url}/jobs/{daily.pk}/")
