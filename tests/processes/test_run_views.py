"""The runs page (filters, pages, the team's runs only), the duration trend drawn on it and on
the job page, and the dashboard's part that its script fetches again."""

from __future__ import annotations

import html
import itertools
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bdre.charts import CHAR_WIDTH
from processes.models import ExecState, Trigger
from tests.helpers.factories import QueueRowFactory
from tests.helpers.runs import job_run, step_run

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"
START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<td><a href="/runs/(\d+)/">', page)]


def the_trend(page: str) -> ET.Element:
    """The page's duration trend, parsed as the XML it must be."""
    found = re.search(r'<figure class="trend"[^>]*>(<svg.*?</svg>)', page, re.S)
    assert found, "no duration trend on the page"
    return ET.fromstring(found.group(1))


def test_the_runs_page_lists_each_job_run_with_its_totals(team, make_job):
    job = make_job("orders")
    run = job_run(job, trigger=Trigger.BACKFILL)
    step = step_run(run, job.steps.get(), rows_in=120, rows_out=118)
    QueueRowFactory(process=job.steps.get(), target_batch=run.target_batch)

    page = _as(team.viewer).get("/runs/")
    text = page.content.decode()

    assert page.status_code == 200
    assert run_ids(text) == [run.pk]  # the step run is no row of its own
    at = text.index(f'<a href="/runs/{run.pk}/">')
    row = text[text.rindex("<tr>", 0, at) :].split("</tr>")[0]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in row.split("<td>")[1:]]
    assert cells == [
        str(run.pk),
        "orders",
        "SUCCESS",
        "backfill",
        "2026-11-20 08:00:00 UTC",
        "90.0 s",
        "1",
        str(run.target_batch_id),
        "120",
        "118",
    ]
    assert f'href="/batches/{run.target_batch_id}/"' in row
    assert step.pk not in run_ids(text)
    assert 'href="/runs/"' in text  # the nav bar's link


def test_the_runs_page_filters_by_job_state_trigger_and_day(team, make_job):
    orders, clicks = make_job("orders"), make_job("clicks")
    old = job_run(orders, start_ts=START - timedelta(days=3))
    failed = job_run(orders, state=ExecState.FAILED, trigger=Trigger.RETRY)
    manual = job_run(clicks, trigger=Trigger.MANUAL)
    client = _as(team.viewer)

    def listed(**params) -> set[int]:
        page = client.get("/runs/", params)
        assert page.status_code == 200
        return set(run_ids(page.content.decode()))

    assert listed() == {old.pk, failed.pk, manual.pk}
    assert listed(job=orders.pk) == {old.pk, failed.pk}
    assert listed(state="FAILED") == {failed.pk}
    chosen = client.get("/runs/", {"state": "NOT_RUNNING"}).content.decode()
    assert '<option value="NOT_RUNNING" selected>not running</option>' in chosen  # words
    assert listed(trigger="manual") == {manual.pk}
    assert listed(started_after="2026-11-20") == {failed.pk, manual.pk}
    # A day's runs are all in, to its last moment.
    assert listed(started_before="2026-11-17") == {old.pk}
    assert listed(job=orders.pk, state="SUCCESS", started_after="2026-11-20") == set()
    bad = client.get("/runs/", {"state": "DONE", "started_after": "yesterday"})
    assert bad.status_code == 200
    assert "Select a valid choice" in bad.content.decode() and run_ids(bad.content.decode()) == []


def test_the_runs_page_shows_fifty_runs_a_page_keeping_the_filters(team, make_job):
    job = make_job("orders")
    made = [job_run(job, start_ts=START + timedelta(minutes=i)) for i in range(53)]
    client = _as(team.viewer)

    first = client.get("/runs/", {"job": job.pk}).content.decode()
    second = client.get("/runs/", {"job": job.pk, "page": 2}).content.decode()

    assert run_ids(first) == [r.pk for r in reversed(made)][:50]
    assert run_ids(second) == [r.pk for r in reversed(made)][50:]
    assert f'href="?job={job.pk}&page=2"' in first and "page 1 of 2" in first
    assert "53 runs" in first


def test_an_outsider_sees_none_of_the_teams_runs(team, make_job):
    job = make_job("orders")
    run = job_run(job, state=ExecState.FAILED)
    client = _as(team.outsider)

    everything = client.get("/runs/").content.decode()
    asked = client.get("/runs/", {"job": job.pk, "state": "FAILED"}).content.decode()
    dashboard = client.get("/dashboard/live/").content.decode()

    assert run_ids(everything) == [] and run_ids(asked) == []
    for text in (everything, asked, dashboard):
        assert "orders" not in text and f"/runs/{run.pk}/" not in text
    assert "duration-trend" not in asked  # not even the trend of a job it may not see


def test_the_duration_trend_draws_the_last_thirty_runs_as_wellformed_svg(team, make_job):
    job = make_job("orders")
    made = [
        job_run(
            job,
            seconds=10 * (i + 1),
            state=ExecState.FAILED if i % 7 == 0 else ExecState.SUCCESS,
            start_ts=START + timedelta(hours=i),
        )
        for i in range(35)
    ]
    client = _as(team.viewer)

    for url in (f"/jobs/{job.pk}/", f"/runs/?job={job.pk}"):
        svg = the_trend(client.get(url).content.decode())
        assert svg.get("role") == "img"
        assert svg.findtext(f"{SVG}title") == "Duration of the last 30 runs of orders"
        bars = svg.findall(f"{SVG}a/{SVG}rect")
        assert len(bars) == 30
        assert [a.get("href") for a in svg.findall(f"{SVG}a")] == [
            f"/runs/{r.pk}/" for r in made[5:]
        ]
        newest = bars[-1].findtext(f"{SVG}title")
        assert newest == f"run {made[-1].pk}: success, 5.8m, started 2026-11-21 18:00"
        heights = [float(b.get("height")) for b in bars]
        assert heights == sorted(heights)  # each run took longer than the one before
        assert {b.get("fill") for b in bars} == {"#3a9a5b", "#c8404d"}
        # The run labels under the bars: the newest among them, and no two overlap.
        labels = [t for t in svg.findall(f"{SVG}text") if t.get("y") == str(150 - 6) and t.text]
        assert labels[-1].text == str(made[-1].pk)
        xs = [float(t.get("x")) for t in labels]
        widest = max(len(t.text) for t in labels) * CHAR_WIDTH
        assert all(b - a >= widest for a, b in itertools.pairwise(xs))


def test_a_job_without_runs_has_no_trend_and_the_unfiltered_list_none(team, make_job):
    job = make_job("orders")
    client = _as(team.viewer)
    assert "duration-trend" not in client.get(f"/jobs/{job.pk}/").content.decode()
    job_run(job)
    assert "duration-trend" not in client.get("/runs/").content.decode()


def test_the_dashboard_refreshes_its_live_part_from_its_own_url(team, make_job):
    job = make_job("orders")
    failed = job_run(job, state=ExecState.FAILED, start_ts=datetime.now(UTC))
    failed.end_ts = failed.start_ts
    failed.save()
    client = _as(team.viewer)

    page = client.get("/").content.decode()
    part = client.get("/dashboard/live/")
    text = part.content.decode()

    assert 'data-refresh="/dashboard/live/"' in page and "bdre/live.js" in page
    assert part.status_code == 200 and "<html" not in text
    assert f'href="/jobs/{job.pk}/"' in text and f'href="/runs/{failed.pk}/"' in text
    assert 'href="/runs/?unresolved=true"' in text
    tiles = re.findall(r'<div class="tile[^"]*"><span>(\d+)</span>', text)
    assert tiles == ["0", "0", "0", "1"]  # running, waiting, dead letters, unresolved failures
    assert Client().get("/dashboard/live/").status_code == 302  # to the log-in page


def test_the_runs_page_takes_as_many_queries_for_fifty_runs_as_for_one(team, make_job):
    job = make_job("orders")
    client = _as(team.viewer)

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert client.get("/runs/", {"job": job.pk}).status_code == 200
        return len(seen)

    run = job_run(job)
    step_run(run, job.steps.get(), rows_in=1)
    one = queries()
    for i in range(49):
        more = job_run(job, start_ts=START + timedelta(minutes=i))
        step_run(more, job.steps.get(), rows_in=1)
        QueueRowFactory(process=job.steps.get(), target_batch=more.target_batch)
    assert queries() == one


@pytest.mark.parametrize(
    ("zone", "day"), [("Etc/GMT-14", "0001-01-01"), ("Etc/GMT+12", "9999-12-31")]
)
def test_a_day_at_the_end_of_the_calendar_is_refused_not_a_server_error(
    team, make_job, settings, zone, day
):
    settings.TIME_ZONE = zone  # the first day starts in year 0 in UTC, the last ends in 10000
    job_run(make_job("orders"))
    page = _as(team.viewer).get("/runs/", {"started_after": day, "started_before": day})
    assert page.status_code == 200
    assert "A day from year 1 to 9999 (in UTC)." in page.content.decode()
    assert run_ids(page.content.decode()) == []


def test_a_run_page_and_the_api_show_each_expectation_with_its_counts(team, make_job):
    job = make_job("report")
    run = job_run(job, state=ExecState.FAILED)
    step = step_run(run, job.steps.get(), rows_in=4)
    step.checks = [
        {"table": "orders", "rule": "positive", "rule_text": "amount >= 0", "kind": "row",
         "action": "drop", "checked": 4, "passed": 3, "failed": 1, "samples": [{"amount": -1.0}]},
        {"table": "orders", "rule": "one_each", "rule_text": "unique(id)", "kind": "unique",
         "action": "fail", "checked": 4, "passed": 2, "failed": 2,
         "samples": [{"id": 3, "items": 2}]},
    ]  # fmt: skip
    step.save()
    page = _as(team.viewer).get(f"/runs/{run.pk}/").content.decode()
    table = page[page.index('data-testid="expectations"') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr class=\"([\w-]*)\">(.*?)</tr>", table, re.S)
    cells = [
        (css, " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())) for css, row in rows
    ]
    assert cells == [
        (
            "check-warned",
            "report_s1 orders positive amount >= 0 drop to orders_quarantine 4 3 1 amount=-1.0",
        ),
        ("check-failed", "report_s1 orders one_each unique(id) fail the step 4 2 2 id=3, items=2"),
    ]
    shown = _as(team.viewer).get(f"/api/v1/runs/{step.pk}/").json()
    assert shown["checks"] == step.checks
