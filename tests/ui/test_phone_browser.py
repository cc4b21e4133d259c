"""In a real browser: every kind of page of the demo's world at a phone's
width (390 x 844) fits it, with no sideways scrolling of the page; wide tables scroll inside
their own box; the menu folds behind one button. Screenshots go to ``var/screenshots/``
(``phone-*.png``)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.helpers.browser import OVERFLOW, PHONE, STICKING_OUT, log_in, shot
from tests.helpers.demo_world import build_demo_world, crawl
from tests.helpers.factories import TEST_PASSWORD

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def kinds_of_page(pages: list[str]) -> dict[str, str]:
    """One page of each kind (its path with the ids as N): the first found of each."""
    kinds: dict[str, str] = {}
    for url in pages:
        kind = re.sub(r"\d+", "N", url).strip("/").replace("/", "-").replace("?", "-") or "home"
        kinds.setdefault(re.sub(r"[^\w-]", "", kind), url)
    return kinds


def test_every_kind_of_page_fits_a_phone_without_sideways_scrolling(
    team, tmp_path, live_server, browser
):
    build_demo_world(team, tmp_path)
    client = Client()
    assert client.login(username=team.developer.username, password=TEST_PASSWORD)
    pages = kinds_of_page(crawl(client).pages)
    assert {"home", "queue", "batches-N", "runs-N", "lineage-nodes-N"} <= set(pages)
    page = log_in(browser, live_server, team.developer, viewport=PHONE)
    # The menu folds behind one button: the page starts right under the bar.
    menu = page.locator("nav[aria-label=main]")
    assert menu.is_hidden() and page.locator("header.top").bounding_box()["height"] < 60
    page.click("label.menu-button")
    assert menu.is_visible() and menu.get_by_role("link", name="Operations").is_visible()
    shot(page, "phone-menu-open")
    too_wide = {}
    for kind, url in sorted(pages.items()):
        page.goto(live_server.url + url)
        shot(page, f"phone-{kind}")
        overflow = page.evaluate(OVERFLOW)
        if overflow > 0:
            too_wide[url] = (overflow, page.evaluate(STICKING_OUT))
    assert not too_wide, f"wider than the phone (url: pixels, what sticks out): {too_wide}"
