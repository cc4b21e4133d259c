"""In a real browser: the lineage page of a column with over 100 columns
upstream and downstream draws a graph in which, as Chromium lays the text out, no text
overlaps another, every node's text stays inside its box, no edge label covers a node and
everything lies inside the view box, drawn at its natural size (the page scrolls it); and
a count's lineage read as a user reads it, its indirect sources dashed. Screenshots:
``var/screenshots/graphs-lineage-page.png``, ``lineage-indirect.png``."""

from __future__ import annotations

import random

import pytest
from playwright.sync_api import expect

from lineage.extract import dot_label, extract, record
from lineage.models import LineageNode, LineageRelation, NodeKind
from tests.helpers.browser import SHOTS, log_in, shot
from tests.helpers.factories import JobFactory, LineageQueryFactory, StepFactory

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]

FUNCTIONS = ("CAST", "SUM", "COALESCE", "UPPER", "DATE_TRUNC", "REGEXP_REPLACE", "ROUND")

# What Chromium measured, in the SVG's own units (the drawing has no transforms).
MEASURE = """svg => {
  const box = e => { const b = e.getBBox(); return {x: b.x, y: b.y, w: b.width, h: b.height}; };
  const meets = (a, b) => a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5
                          && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5;
  const inside = (a, b) => a.x >= b.x - 0.5 && a.y >= b.y - 0.5
                           && a.x + a.w <= b.x + b.w + 0.5 && a.y + a.h <= b.y + b.h + 0.5;
  const vb = svg.viewBox.baseVal;
  const view = {x: vb.x, y: vb.y, w: vb.width, h: vb.height};
  const texts = [...svg.querySelectorAll('text')].map(t => ({t: t.textContent, b: box(t)}));
  const overlaps = [];
  for (let i = 0; i < texts.length; i++)
    for (let j = i + 1; j < texts.length; j++)
      if (meets(texts[i].b, texts[j].b)) overlaps.push([texts[i].t, texts[j].t]);
  const rects = [...svg.querySelectorAll('g.node')].map(g => box(g.querySelector('rect')));
  const spilled = [...svg.querySelectorAll('g.node')].flatMap(g => {
    const r = box(g.querySelector('rect'));
    return [...g.querySelectorAll('text')].filter(t => !inside(box(t), r)).map(t => t.textContent);
  });
  const onNodes = [...svg.querySelectorAll('text.edge-label')]
    .filter(t => rects.some(r => meets(box(t), r))).map(t => t.textContent);
  const outside = [...texts.map(t => t.b), ...rects].filter(b => !inside(b, view)).length;
  return {texts: texts.length, labels: svg.querySelectorAll('text.edge-label').length,
          overlaps, spilled, onNodes, outside,
          drawnWidth: svg.getBoundingClientRect().width, width: svg.width.baseVal.value};
}"""


def fan(team) -> LineageNode:
    """A column of ``lake.stage_0`` fed by a tree of 60 columns of three tables upstream and
    feeding one of 60 downstream, with some edges across the branches; every edge through
    one or two functions, some columns with long names."""
    rnd = random.Random(21)
    step = StepFactory(parent=JobFactory(bus_domain=team.application))
    query = LineageQueryFactory(process=step)
    tables = {
        depth: LineageNode.objects.create(
            node_type_id=NodeKind.TABLE,
            qualified_name=f"lake.stage_{depth}",
            display_name=f"stage_{depth}",
            team=team.group,
        )
        for depth in range(-3, 4)
    }
    counter = iter(range(1000))

    def column(depth: int) -> LineageNode:
        n = next(counter)
        name = (
            f"metric_{n}"
            if n % 6
            else f"customer_lifetime_value_in_reporting_currency_after_discounts_{n}"
        )
        return LineageNode.objects.create(
            node_type_id=NodeKind.COLUMN,
            container_node=tables[depth],
            qualified_name=f"{tables[depth].qualified_name}.{name}",
            display_name=name,
            team=team.group,
        )

    focus = column(0)
    edges: list[tuple[LineageNode, LineageNode]] = []
    for direction in (-1, 1):
        level = [focus]
        for depth, fan_out in zip((1, 2, 3), (6, 3, 2), strict=True):
            nxt = []
            for node in level:
                for _ in range(fan_out):
                    other = column(direction * depth)
                    nxt.append(other)
                    edges.append((other, node) if direction < 0 else (node, other))
            # a few edges across the branches, as real lineage has
            for _ in range(len(nxt) // 4):
                a, b = rnd.choice(level), rnd.choice(nxt)
                if (b, a) not in edges and (a, b) not in edges:
                    edges.append((b, a) if direction < 0 else (a, b))
            level = nxt
    LineageRelation.objects.bulk_create(
        LineageRelation(
            src_node=a,
            target_node=b,
            query=query,
            dot_string=dot_label(rnd.sample(FUNCTIONS, rnd.choice([1, 1, 2]))),
        )
        for a, b in edges
    )
    return focus


def test_a_lineage_graph_of_over_100_columns_draws_no_text_over_another(team, live_server, browser):
    focus = fan(team)
    page = log_in(browser, live_server, team.viewer, viewport=(1280, 900))
    page.goto(f"{live_server.url}/lineage/nodes/{focus.pk}/?level=column")
    svg = page.locator(".graph svg")
    assert svg.locator("g.node").count() == 121
    found = svg.evaluate(MEASURE)
    shot(page, "graphs-lineage-page")
    whole = browser.new_page(viewport={"width": 1280, "height": 900})
    whole.set_content(svg.evaluate("svg => svg.outerHTML"))
    whole.screenshot(path=str(SHOTS / "graphs-lineage-graph.png"), full_page=True)
    assert found["overlaps"] == []
    assert found["spilled"] == []
    assert found["onNodes"] == []
    assert found["outside"] == 0
    assert found["labels"] >= 100  # most of the ~140 labels are drawn on their edge
    assert found["drawnWidth"] == found["width"]  # natural size: scrolled, never shrunk
    # a name too long for a box ends in an ellipsis, and the node's tooltip has it whole
    cut = svg.evaluate(
        """svg => [...svg.querySelectorAll('g.node')]
             .filter(g => g.querySelector('text').textContent.endsWith('\u2026'))
             .map(g => g.querySelector('title').textContent)"""
    )
    assert "customer_lifetime_value_in_reporting_currency_after_discounts_6 · lake.stage_-1" in cut


DAILY = """SELECT to_date(collector_tstamp) AS day, count(*) AS page_views
           FROM lake.atomic_events WHERE event = 'page_view' GROUP BY to_date(collector_tstamp)"""


def test_a_viewer_reads_what_a_count_depends_on_dashed_and_the_query_behind_it(
    team, live_server, browser
):
    """Task "read column lineage": the search lists the table before its columns; the
    count's page draws its indirect sources dashed (the filter's ``event``, the day's
    ``collector_tstamp``), says how on hover, and names the query and the run behind it."""
    step = StepFactory(parent=JobFactory(bus_domain=team.application, name="clickstream_daily"))
    query = LineageQueryFactory(process=step, query_string=DAILY)
    schema = {"lake": {"atomic_events": {"collector_tstamp": "timestamp", "event": "string"}}}
    record(query, extract(DAILY, schema=schema, target="lake.daily_page_views"))

    page = log_in(browser, live_server, team.viewer, viewport=(1366, 900))
    page.goto(f"{live_server.url}/lineage/")
    page.fill("input[name=q]", "page_views")
    page.click("text=Search")
    sections = page.locator("section")
    expect(sections.nth(0)).to_contain_text("lake.daily_page_views")  # the table first
    page.get_by_role("link", name="lake.daily_page_views.page_views").click()
    svg = page.locator("svg").first
    dashed = svg.locator("[stroke-dasharray]")
    assert dashed.count() >= 2
    hovered = " ".join(svg.locator("title").all_text_contents())
    assert "filter (indirect)" in hovered and "group by (indirect)" in hovered
    drawn = svg.text_content() or ""
    assert "event · lake.atomic_events" in drawn and "collector_tstamp" in drawn
    assert page.get_by_text(f"query {query.pk}").is_visible()
    shot(page, "lineage-indirect")
