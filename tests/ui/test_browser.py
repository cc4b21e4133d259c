"""The UI in a real browser (Debian's Chromium, headless, driven by Playwright) against a live
server and a real Celery worker: a developer registers a job of two steps through the forms,
runs it and watches its run page reach SUCCESS, then opens its workflow and a lineage graph;
a viewer finds no button that changes anything. Screenshots of every page go to
``var/screenshots/``."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from lineage.extract import extract, record
from processes.models import InstanceExec, Process
from tests.helpers.browser import log_in, shot
from tests.helpers.factories import HiveTableFactory, LineageQueryFactory
from tests.helpers.jobs import CALL, SQL
from tests.helpers.workers import Worker, purge_broker, worker_env

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def worker(tmp_path, settings):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    purge_broker()
    w = Worker(tmp_path / "worker.log", worker_env(tmp_path)).start()
    yield w
    w.stop()


def test_a_developer_registers_runs_and_inspects_a_job(team, live_server, browser, worker):
    page = log_in(browser, live_server, team.developer)
    shot(page, "01-dashboard-developer")

    page.click("text=Register")
    page.select_option("select[name=application]", str(team.application.pk))
    page.fill("input[name=name]", "browser_job")
    page.select_option("select[name=job_type]", "5")
    for i, name in enumerate(("browser_job_first", "browser_job_second")):
        page.fill(f"input[name=step-{i}-name]", name)
        page.select_option(f"select[name=step-{i}-kind]", str(CALL))
        # The kind chosen, what it reads shows under the step, and as the box's placeholder.
        help = page.locator("[data-testid=kind-help]").nth(i)
        assert "callable.path (no default)" in help.inner_text()
        assert (
            page.locator(f"textarea[name=step-{i}-properties]")
            .get_attribute("placeholder")
            .startswith("callable.path = …")
        )
        page.fill(
            f"textarea[name=step-{i}-properties]",
            "callable.path = tests.processes.callables.sleep\ntest.sleep = 2",
        )
    shot(page, "02-register-form")
    page.click("button[name=register]")
    page.wait_for_selector("text=is registered with 2 steps")
    job = Process.objects.get(name="browser_job", parent=None)
    assert page.url == f"{live_server.url}/jobs/{job.pk}/"
    shot(page, "03-job-registered")

    page.click("text=Run now")
    page.wait_for_url("**/runs/*/")
    page.wait_for_selector("text=of browser_job started")
    run = InstanceExec.objects.get(process=job, parent__isnull=True)
    assert page.url == f"{live_server.url}/runs/{run.pk}/"  # the run it started opens
    state = page.locator("[data-testid=run-state]")
    shot(page, "04-run-in-progress")
    # the page refreshes itself while the run goes on: no reload here
    state.filter(has_text="SUCCESS").wait_for(timeout=90_000)
    assert page.locator(".lane").count() == 2
    shot(page, "05-run-success")

    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    graph = page.locator(".graph svg")
    assert graph.locator("g.node[data-state=SUCCESS]").count() == 2
    shot(page, "06-workflow-graph")

    step = job.steps.order_by("id").first()
    record(
        LineageQueryFactory(process=step),
        extract(
            "SELECT page, COUNT(*) AS views, SUM(amount) AS revenue FROM lake.events GROUP BY page",
            schema={"lake": {"events": {"page": "string", "amount": "double"}}},
            target="lake.daily_pages",
        ),
    )
    page.click("text=Lineage")
    page.fill("input[name=q]", "daily")
    page.click("text=Search")
    page.click("text=lake.daily_pages")
    page.click("text=column level")
    # The click returns once the next page starts loading: assertions that wait for it.
    expect(page.locator(".graph svg g.node")).to_have_count(5)  # 2 sources, 3 outputs
    expect(page.locator(".graph svg")).to_contain_text("SUM")
    shot(page, "07-lineage-graph")

    page.set_viewport_size({"width": 820, "height": 1180})  # a tablet, upright
    page.goto(f"{live_server.url}/")
    shot(page, "08-dashboard-tablet")
    worker.stop()


def test_a_viewer_finds_no_button_that_changes_anything(team, live_server, browser, pipeline):
    job, outcome = pipeline
    page = log_in(browser, live_server, team.viewer)
    for name, path in [
        ("10-viewer-dashboard", "/"),
        ("11-viewer-job", f"/jobs/{job.pk}/"),
        ("12-viewer-run", f"/runs/{outcome.instance_exec_id}/"),
        ("13-viewer-queue", "/queue/"),
        ("14-viewer-batch", f"/batches/{outcome.target_batch_id}/"),
        ("18-viewer-batches", "/batches/"),
        ("15-viewer-templates", "/templates/"),
        ("16-viewer-team", f"/teams/{team.group.pk}/"),
        ("17-viewer-lineage", "/lineage/"),
    ]:
        page.goto(live_server.url + path)
        shot(page, name)
        posting = page.locator("form[method=post]")
        # the only form that posts is the log-out button in the header
        assert posting.count() == 1, path
        assert posting.first.get_attribute("action") == "/accounts/logout/"
        assert page.locator("a.button").count() == 0, path
        texts = " ".join(page.locator("button").all_inner_texts())
        for word in ("Run now", "Terminate", "Pause", "Resume", "Requeue", "Discard", "Delete"):
            assert word not in texts, (path, word)


def test_a_developer_validates_a_jobs_sql_before_registering_it(team, live_server, browser):
    HiveTableFactory(
        bus_domain=team.application,
        table_name="atomic_events",
        ddl="struct<event:string,collector_tstamp:timestamp>",
    )
    page = log_in(browser, live_server, team.developer)
    page.goto(f"{live_server.url}/jobs/new/")
    page.select_option("select[name=application]", str(team.application.pk))
    page.fill("input[name=name]", "daily_views")
    page.select_option("select[name=job_type]", "5")
    page.fill("input[name=step-0-name]", "daily_views_sql")
    page.select_option("select[name=step-0-kind]", str(SQL))
    properties = "textarea[name=step-0-properties]"
    page.fill(
        properties,
        "sql.query = SELECT to_date(collector_tstmp) AS day, count(*) AS views "
        "FROM atomic_events WHERE evnt = 'page_view' GROUP BY 1",
    )
    page.click("button[name=validate]")
    problems = page.locator("[data-testid=validation] .problems li")
    problems.first.wait_for()
    assert problems.count() == 2
    text = page.locator("[data-testid=validation]").inner_text()
    assert (
        "collector_tstmp is not a column of atomic_events (did you mean collector_tstamp?)" in text
    )
    assert "evnt is not a column of atomic_events (did you mean event?)" in text
    shot(page, "register-validate-problems")
    assert not Process.objects.filter(name="daily_views").exists()

    # What was typed is still there: fix both and validate again, then register.
    fixed = page.input_value(properties).replace("tstmp", "tstamp").replace("evnt", "event")
    page.fill(properties, fixed)
    page.click("button[name=validate]")
    page.wait_for_selector("text=The SQL reads only tables and columns your team has.")
    shot(page, "register-validate-ok")
    page.click("button[name=register]")
    page.wait_for_selector("text=is registered with 1 step")
