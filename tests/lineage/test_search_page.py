"""The lineage search page: tables whose name holds the text first, then only the columns
whose own name holds it (not every column of a table whose name does), and the columns of
one table on request; a team sees only its own nodes."""

from __future__ import annotations

import re

import pytest

from lineage.extract import extract, record
from lineage.models import LineageNode
from tests.helpers.factories import LineageQueryFactory
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db

EVENTS = {
    "event_id": "string",
    "event": "string",
    "page_url": "string",
    "collector_tstamp": "timestamp",
}


@pytest.fixture
def daily(team, make_job):
    """A team's daily summary, read from its events table."""
    job = make_job("daily", steps=1)
    record(
        LineageQueryFactory(process=job.steps.first()),
        extract(
            "SELECT to_date(collector_tstamp) AS day, count_if(event = 'page_view') AS page_views, "
            "first(page_url) AS top_page FROM lake.events GROUP BY 1",
            schema={"lake": {"events": EVENTS}},
            target="lake.daily_page_views",
        ),
    )


def listed(page: str, heading: str) -> list[str]:
    section = page.split(f"<h2>{heading}", 1)[1].split("</section>", 1)[0]
    return re.findall(r'<li><a href="/lineage/nodes/\d+/">([^<]+)</a>', section)


def test_a_search_lists_matching_tables_then_only_columns_named_so(team, daily):
    client = client_as(team.viewer)
    page = client.get("/lineage/", {"q": "event"}).content.decode()
    assert listed(page, "Tables") == ["lake.events"]
    # Not collector_tstamp nor page_url, columns of lake.events too.
    assert listed(page, "Columns") == ["lake.events.event"]
    assert "1 whose name holds “event”" in page

    page = client.get("/lineage/", {"q": "page"}).content.decode()
    assert listed(page, "Tables") == ["lake.daily_page_views"]
    assert listed(page, "Columns") == [
        "lake.daily_page_views.page_views",
        "lake.daily_page_views.top_page",
        "lake.events.page_url",
    ]


def test_the_columns_of_one_table_are_listed_and_searched_within_it(team, daily):
    events = LineageNode.objects.get(qualified_name="lake.events")
    client = client_as(team.viewer)
    page = client.get("/lineage/", {"table": events.pk}).content.decode()
    assert "Tables" not in page.split("<h1>", 1)[1].split("<h2>Columns", 1)[0]
    assert listed(page, "Columns") == [
        "lake.events.collector_tstamp",
        "lake.events.event",
        "lake.events.page_url",
    ], "the columns lineage knows: those a query read"
    assert "a column of lake.events" in page
    page = client.get("/lineage/", {"table": events.pk, "q": "tstamp"}).content.decode()
    assert listed(page, "Columns") == ["lake.events.collector_tstamp"]
    for odd in ("x", "²", "9" * 30):
        assert client.get("/lineage/", {"table": odd}).status_code == 404
    assert client_as(team.outsider).get("/lineage/", {"table": events.pk}).status_code == 404
    assert (
        listed(client_as(team.outsider).get("/lineage/", {"q": "e"}).content.decode(), "Tables")
        == []
    )
