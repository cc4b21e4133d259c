"""In a real browser: a viewer opens the page of a run whose step failed,
reads the step's traceback, searches the logs and downloads one. Screenshots go to
``var/screenshots/`` (the run page as ``step-logs-*.png``)."""

from __future__ import annotations

import pytest
from playwright import sync_api

from processes import orchestrator
from tests.helpers.browser import SHOTS, log_in, shot
from tests.helpers.jobs import build_job, callable_step

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def test_a_viewer_reads_searches_and_downloads_a_failed_steps_log(
    team, live_server, browser, settings, tmp_path
):
    settings.BDRE_LOG_DIR = tmp_path / "step-logs"
    job = build_job(
        team,
        "talker",
        [
            callable_step("warmup"),
            callable_step("talk", "tests.processes.callables.talk_and_fail", words="w1"),
        ],
    )
    run_id = orchestrator.run_job(job.pk).instance_exec_id
    page = log_in(browser, live_server, team.viewer, viewport=(1100, 900))
    page.goto(f"{live_server.url}/runs/{run_id}/")
    logs = page.locator("[data-testid=step-log]")
    assert logs.count() == 2
    failed = logs.nth(1)
    assert "Traceback (most recent call last):" in failed.inner_text()
    assert "ValueError: no good w1" in failed.inner_text()
    shot(page, "step-logs-run-page")
    page.screenshot(path=str(SHOTS / "step-logs-run-page-top.png"))

    page.fill("input[name=q]", "printed")
    page.click("form.logsearch button")
    page.wait_for_url(f"{live_server.url}/runs/{run_id}/?q=printed")
    assert "stdout: printed w1" in failed.inner_text()
    assert "Traceback" not in failed.inner_text()
    assert "1 of" in failed.inner_text()
    shot(page, "step-logs-search")

    with page.expect_download() as download:
        failed.locator("[data-testid=step-log-download]").click()
    text = download.value.path().read_text()
    # The download takes the search with it: the lines shown, under the step's name.
    assert text.startswith("==== step talk (step run ")
    assert "stdout: printed w1" in text
    assert "Traceback" not in text


def test_the_run_page_tails_a_running_steps_log_without_a_reload(
    team, live_server, browser, settings, tmp_path
):
    """The page of a run in progress shows the step's log as it grows, then the run's end,
    by itself: no reload (a marker set on the page's window at load survives)."""
    import threading

    from django.db import connection

    from processes.models import InstanceExec

    settings.BDRE_LOG_DIR = tmp_path / "step-logs"
    flag = tmp_path / "flag"
    job = build_job(
        team,
        "watched",
        [callable_step("talk", "tests.processes.callables.talk_until_flag", flag=str(flag))],
    )

    def run() -> None:
        try:
            orchestrator.run_job(job.pk)
        finally:
            connection.close()

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        page = log_in(browser, live_server, team.viewer, viewport=(1100, 900))
        run_id = None
        for _ in range(100):
            run_id = InstanceExec.objects.filter(process=job).values_list("pk", flat=True).first()
            if run_id:
                break
            page.wait_for_timeout(100)
        page.goto(f"{live_server.url}/runs/{run_id}/")
        page.evaluate("window.notReloaded = true")
        log = page.locator("[data-testid=step-log]").first
        log.get_by_text("first line, before the flag").wait_for()
        assert "second line" not in log.inner_text()
        assert page.locator("[data-testid=run-state]").inner_text() == "RUNNING"
        # It lasts until now while it runs, not 0 s: the page's next refresh says more.
        sync_api.expect(page.locator("#live dl").first).not_to_contain_text("0.0 s", timeout=15_000)
        shot(page, "step-logs-live-running")

        flag.write_text("go")
        page.locator("[data-testid=run-state]", has_text="SUCCESS").wait_for(timeout=30_000)
        log = page.locator("[data-testid=step-log]").first
        assert "second line, the flag is there" in log.inner_text()
        assert page.evaluate("window.notReloaded") is True
        shot(page, "step-logs-live-done")
    finally:
        flag.write_text("go")
        runner.join(60)
