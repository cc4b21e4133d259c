"""In a real browser: a developer reads a dead letter's runs on the queue
page, ticks two dead letters and discards them together (their last error stays, the
reason is shown beside it), and a paused job's "Run now" asks before it runs. Screenshots go
to ``var/screenshots/`` (``dead-letters-*.png``, ``paused-run-*.png``)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from batches.models import BatchConsumpQueue, BatchState
from processes import lifecycle, schedules
from processes.models import InstanceExec
from tests.helpers.browser import log_in, shot
from tests.helpers.factories import QueueRowFactory

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def test_a_developer_reads_dead_letters_runs_and_discards_two_at_once(
    team, live_server, browser, make_job
):
    upstream = make_job("ingest")
    job = make_job("load", upstream=[upstream], max_retries=2)
    rows = [QueueRowFactory(process=job.steps.get(), source_process=upstream) for _ in range(2)]
    for error in ("disk full", "schema mismatch in column 3"):
        lifecycle.init_job(job.pk, 10)
        lifecycle.term_job(job.pk, error)
    BatchConsumpQueue.objects.filter(pk__in=[r.pk for r in rows]).update(
        batch_state_id=BatchState.FAILED  # requeued by hand, failed again: discardable
    )
    page = log_in(browser, live_server, team.developer, viewport=(1100, 800))
    page.goto(f"{live_server.url}/queue/")
    first = page.locator("details.attempts").first
    first.locator("summary").click()
    assert "disk full" in first.inner_text() and "schema mismatch" in first.inner_text()
    shot(page, "dead-letters-history")
    for row in rows:
        page.check(f"input[name=ids][value='{row.pk}']")
    page.click("form#bulk button[value=discard]")
    expect(page.locator("h1")).to_have_text("Discard 2 rows?")
    page.fill("input[name=reason]", "the upstream files were corrupt")
    shot(page, "dead-letters-confirm")
    page.click("text=Yes, discard 2 rows")
    page.wait_for_url(f"{live_server.url}/queue/")
    assert "2 rows discarded." in page.content()
    shot(page, "dead-letters-discarded")
    for row in rows:
        row.refresh_from_db()
        assert row.batch_state_id == BatchState.DISCARDED
        assert row.last_error == "schema mismatch in column 3"
        assert row.discard_reason == "discarded by developer: the upstream files were corrupt"


def test_run_now_of_a_paused_job_asks_first(team, live_server, browser, make_job, sent):
    job = make_job("nightly")
    schedules.set_schedule(job.pk, schedules.Schedule(every_seconds=3600))
    schedules.pause(job.pk)
    page = log_in(browser, live_server, team.developer, viewport=(390, 844))
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    question = page.locator("text=This job is paused: run it anyway?")
    assert not question.is_visible()
    page.click("details.confirm summary")
    assert question.is_visible()
    shot(page, "paused-run-confirm")
    page.click("text=Run anyway")
    page.wait_for_url("**/runs/*/")  # the run it started opens
    run = InstanceExec.objects.get(process=job)
    assert page.url == f"{live_server.url}/runs/{run.pk}/"
    assert f"Run {run.pk} of nightly started" in page.content()
    assert schedules.is_paused(job.pk)
    shot(page, "paused-run-started")
