"""In a real browser: a developer opens a failed run, fixes the cause, clicks Retry, lands
on the run it started, and after that run the failed one says it is resolved, with a link;
the dashboard no longer counts it. Screenshots go to ``var/screenshots/`` (``retry-*.png``)."""

from __future__ import annotations

import pytest

from processes import orchestrator
from processes.models import ExecState, InstanceExec
from tests.helpers.browser import log_in, shot
from tests.helpers.jobs import fragile_pipeline

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def test_a_developer_retries_a_failed_run_in_one_click(team, live_server, browser, tmp_path):
    flag = tmp_path / "flag"
    producer, consumer = fragile_pipeline(team, flag, max_retries=1)
    assert orchestrator.run_job(producer.pk).succeeded
    failed = orchestrator.run_job(consumer.pk)
    assert not failed.succeeded

    page = log_in(browser, live_server, team.developer, viewport=(1366, 800))
    page.goto(f"{live_server.url}/runs/{failed.instance_exec_id}/")
    retry = page.get_by_role("button", name="Retry")
    assert retry.is_visible()
    shot(page, "retry-01-failed-run")

    flag.touch()  # the fix
    failed_url = page.url
    retry.click()
    page.wait_for_url(lambda url: url != failed_url)  # the run it started opens
    started = InstanceExec.objects.filter(process=consumer).latest("id")
    assert page.url == f"{live_server.url}/runs/{started.pk}/"
    said = page.locator(".flash").inner_text()
    assert f"Run {started.pk}, retrying run {failed.instance_exec_id}, of consumer started" in said
    assert "queued now for the workers of the celery queue" in said
    shot(page, "retry-02-the-run-it-started")

    # The worker's part, here: the step the retry sent, then the run's end.
    orchestrator.execute_step(started.pk, consumer.steps.get().pk)
    orchestrator.advance(started.pk)
    started.refresh_from_db()
    assert started.exec_state_id == ExecState.SUCCESS, started.error
    page.goto(f"{live_server.url}/runs/{failed.instance_exec_id}/")
    resolved = page.locator("[data-testid=resolved]")
    assert f"Resolved: run {started.pk} delivered batch {failed.target_batch_id}" in (
        resolved.inner_text()
    )
    assert page.get_by_role("button", name="Retry").count() == 0
    shot(page, "retry-03-resolved")
    resolved.get_by_role("link").click()
    page.wait_for_url(f"{live_server.url}/runs/{started.pk}/")

    page.goto(f"{live_server.url}/")
    tile = page.locator(".tile", has_text="unresolved failures")
    assert tile.locator("span").inner_text() == "0"
