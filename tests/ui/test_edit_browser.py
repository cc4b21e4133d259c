"""In a real browser: a developer opens a job's edit page from its page,
changes a step's SQL, saves, and reads it on the job's page; a refused statement comes back
on its step. At a phone's width the edit page does not scroll sideways. Screenshots go to
``var/screenshots/`` (``edit-*.png``)."""

from __future__ import annotations

import pytest

from processes.models import Property
from tests.helpers.browser import OVERFLOW, PHONE, STICKING_OUT, log_in, shot
from tests.helpers.jobs import build_job, callable_step, sql_step

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def test_a_developer_edits_a_steps_sql_and_sees_it_on_the_job_page(team, live_server, browser):
    job = build_job(
        team,
        "daily_views",
        [
            sql_step("views_by_page", "SELECT 1 AS x", output="web.views"),
            callable_step("notify", "tests.processes.callables.sleep"),
        ],
    )
    page = log_in(browser, live_server, team.developer, viewport=(1100, 800))
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    page.click("a.button:text('Edit')")
    page.wait_for_url(f"{live_server.url}/jobs/{job.pk}/edit/")
    step = page.locator("fieldset[data-step=views_by_page]")
    properties = step.locator("textarea[name$=-properties]")
    assert "sql.query = SELECT 1 AS x" in properties.input_value()

    properties.fill(
        "sql.output_table = web.views\n"
        "sql.query = SELECT 1 AS x\n  UNION ALL SELECT * FROM web.clicks; DROP TABLE web.clicks"
    )
    page.click("button[name=save]")
    assert "one statement may run" in step.locator("span.error").inner_text()
    shot(page, "edit-refused")
    assert Property.objects.get(process__name="views_by_page", key="query").value == (
        "SELECT 1 AS x"
    )

    step.locator("textarea[name$=-properties]").fill(
        "sql.output_table = web.views\nsql.query = SELECT page, count(*) AS views\n"
        "  FROM web.clicks GROUP BY page"
    )
    page.fill("textarea[name=properties]", "owner.email = ops@example.com")
    shot(page, "edit-page")
    page.click("button[name=save]")
    page.wait_for_url(f"{live_server.url}/jobs/{job.pk}/")
    assert "daily_views is saved." in page.locator("main").inner_text()
    shown = " ".join(page.locator("table.props").all_inner_texts()).split()
    assert "SELECT page, count(*) AS views FROM web.clicks GROUP BY page" in " ".join(shown)
    assert "ops@example.com" in shown
    shot(page, "edit-saved")

    phone = log_in(browser, live_server, team.developer, viewport=PHONE)
    phone.goto(f"{live_server.url}/jobs/{job.pk}/edit/")
    shot(phone, "edit-phone")
    overflow = phone.evaluate(OVERFLOW)
    assert overflow <= 0, phone.evaluate(STICKING_OUT)
