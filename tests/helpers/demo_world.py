"""The demo's world in miniature, without Spark, and a walk through every page of it: an ingest
job scanning a landing folder, a consumer job of ``python.callable`` steps that succeeded,
one that failed into the dead letter, queued rows, tables and lineage."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

from django.test import Client

from batches.models import BatchState
from lineage.extract import extract, record
from processes import operations, orchestrator, schedules
from processes.models import InstanceExec, Operation, Process
from tests.helpers.factories import (
    HiveTableFactory,
    LineageQueryFactory,
    QueueRowFactory,
    grant_root,
)
from tests.helpers.jobs import build_job, callable_step, scan_step

MAX_PAGES = 400
SLEEP = "tests.processes.callables.sleep"
FAIL = "tests.processes.callables.talk_and_fail"
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


def build_demo_world(team, tmp_path: Path) -> list[Process]:
    """The demo's shape on the team: ingest → events (two steps) → a failing report job
    that has dead-lettered its input, with schedules, a table and a query's lineage."""
    landing = tmp_path / "landing"
    landing.mkdir()
    grant_root(team.group, landing)
    ingest = build_job(team, "clickstream_ingest", [scan_step("clickstream_scan", landing)])
    events = build_job(
        team,
        "clickstream_events",
        [
            callable_step("events_load", SLEEP, upstream=[ingest]),
            callable_step("events_count", SLEEP),
        ],
    )
    report = build_job(
        team,
        "clickstream_report",
        [callable_step("report_build", FAIL, upstream=[events])],
        max_retries=1,
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
    # An operation's record, as a reprocess of the events batch leaves it (its page, its list).
    operations.record(
        kind=Operation.Kind.REPROCESS,
        job=events,
        plan=[{"job_id": events.pk, "job": events.name, "target_batch_id": loaded.target_batch_id}],
        asked={"batch": loaded.target_batch_id},
        name="events-01.tsv fixed",
        by=team.developer,
    )
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
