"""A team member's walk through every page: from the dashboard, every link of every page is
followed, and none answers 404 or 500. The world is the demo's in miniature, without Spark:
an ingest job scanning a landing folder, a consumer job of ``python.callable`` steps that
succeeded, one that failed into the dead letter, queued rows, tables and lineage."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from django.test import Client

from batches.models import BatchState
from lineage.extract import extract, record
from lineage.models import LineageNode
from processes import orchestrator, schedules
from processes.models import InstanceExec, Process
from processes.registry import StepSpec, create_job
from tests.factories import (
    JOB_TYPE,
    TEST_PASSWORD,
    HiveTableFactory,
    LineageQueryFactory,
    QueueRowFactory,
    grant_root,
)
from tests.processes.pipelines import SCAN

pytestmark = pytest.mark.django_db

CALL = 51
MAX_PAGES = 400
SLEEP = {"callable": {"path": "tests.processes.callables.sleep"}}
FAIL = {"callable": {"path": "tests.processes.callables.talk_and_fail"}}
# Leaving, static files and Django's raw records (the superuser's) are not walked; downloads
# (logs, SVG and DOT graphs) are fetched for their status, not read for links.
SKIPPED_PREFIXES = ("/accounts/logout/", "/static/", "/admin/")


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "href" and value and tag in {"a", "area"}:
                self.hrefs.append(value)


def land(landing: Path, name: str) -> None:
    partial = landing / f"_{name}"
    partial.write_text("event\tpage_view\n")
    partial.rename(landing / name)


@pytest.fixture
def demo_world(team, tmp_path):
    return build_demo_world(team, tmp_path)


def build_demo_world(team, tmp_path: Path) -> list[Process]:
    """The demo's shape on the team: ingest → events (two steps) → a failing report job
    that has dead-lettered its input, with schedules, a table and a query's lineage."""
    landing = tmp_path / "landing"
    landing.mkdir()
    grant_root(team.group, landing)
    ingest = create_job(
        bus_domain=team.application,
        name="clickstream_ingest",
        process_type_id=JOB_TYPE,
        steps=[
            StepSpec(
                "clickstream_scan",
                SCAN,
                properties={"scan": {"location": landing.as_uri(), "min_age_seconds": "0"}},
            )
        ],
    )
    events = create_job(
        bus_domain=team.application,
        name="clickstream_events",
        process_type_id=JOB_TYPE,
        steps=[
            StepSpec("events_load", CALL, upstream=[ingest.pk], properties=SLEEP),
            StepSpec("events_count", CALL, properties=SLEEP),
        ],
    )
    report = create_job(
        bus_domain=team.application,
        name="clickstream_report",
        process_type_id=JOB_TYPE,
        max_retries=1,
        steps=[StepSpec("report_build", CALL, upstream=[events.pk], properties=FAIL)],
    )
    schedules.set_schedule(ingest.pk, schedules.Schedule(every_seconds=600))
    schedules.set_schedule(events.pk, schedules.Schedule(on_upstream=True))
    for name in ("events-01.tsv", "events-02.tsv"):
        land(landing, name)
    scanned = orchestrator.run_job(ingest.pk)
    assert not scanned.error, scanned.error
    loaded = orchestrator.run_job(events.pk)
    assert not loaded.error, loaded.error
    failed = orchestrator.run_job(report.pk)
    assert failed.error, "the report job fails"
    land(landing, "events-03.tsv")
    orchestrator.run_job(ingest.pk)  # a batch waiting in the events job's queue

    load = events.steps.get(name="events_load")
    QueueRowFactory(process=load, batch_state_id=BatchState.DISCARDED)
    HiveTableFactory(bus_domain=team.application, table_name="page_views")
    # As a spark.sql step records its query: with the step's run, not the job's.
    step_run = InstanceExec.objects.get(parent_id=loaded.instance_exec_id, process=load)
    query = LineageQueryFactory(process=load, instance_exec=step_run)
    record(
        query,
        extract(
            "SELECT page, COUNT(*) AS views FROM lake.events GROUP BY page",
            schema={"lake": {"events": {"page": "string"}}},
            target="default.page_views",
        ),
    )
    return [ingest, events, report]


@dataclass
class Walk:
    fetched: list[str] = field(default_factory=list)  # every URL asked for
    pages: list[str] = field(default_factory=list)  # those that answered an HTML page
    bad: list[tuple[str, str, int]] = field(default_factory=list)  # (page, link, 404 or 500)


def crawl(client: Client, start: str = "/") -> Walk:
    """Every same-site page reachable from ``start`` by following links."""
    seen = {start}
    todo: deque[tuple[str, str]] = deque([("(start)", start)])
    walk = Walk()
    while todo and len(walk.fetched) < MAX_PAGES:
        source, url = todo.popleft()
        answer = client.get(url)
        walk.fetched.append(url)
        if answer.status_code in (404, 500):
            walk.bad.append((source, url, answer.status_code))
            continue
        if answer.status_code != 200 or "text/html" not in answer.get("Content-Type", ""):
            continue
        walk.pages.append(url)
        parser = Links()
        parser.feed(answer.content.decode())
        for href in parser.hrefs:
            link = urldefrag(urljoin(url, href)).url
            parts = urlsplit(link)
            if parts.scheme not in ("", "http") or parts.netloc not in ("", "testserver"):
                continue  # another site
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            if target.startswith(SKIPPED_PREFIXES):
                continue
            if target not in seen:
                seen.add(target)
                todo.append((url, target))
    return walk


def test_a_developer_follows_every_link_of_every_page_without_a_404_or_500(team, demo_world):
    client = Client()
    assert client.login(username=team.developer.username, password=TEST_PASSWORD)
    walk = crawl(client)
    assert not walk.bad, "broken links:\n" + "\n".join(
        f"  {status} {link}  (on {page})" for page, link, status in walk.bad
    )
    # the walk reached the whole world: each job, every run, a batch, the queue, the lineage
    visited = {urlsplit(url).path for url in walk.pages}
    runs = InstanceExec.objects.filter(process__in=demo_world).values_list("pk", flat=True)
    assert {f"/jobs/{job.pk}/" for job in demo_world} <= visited
    assert {f"/runs/{pk}/" for pk in runs} <= visited
    table = LineageNode.objects.get(qualified_name="default.page_views")
    assert {"/queue/", "/batches/", f"/lineage/nodes/{table.pk}/"} <= visited
    assert any(path.startswith("/batches/") and path != "/batches/" for path in visited)
