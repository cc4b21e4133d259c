"""Chromium driven by Playwright (the ``browser`` fixture, tests/ui/conftest.py): logging in,
screenshots, and what says a page is too wide for a phone."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"


def log_in(browser, live_server, user, viewport=(1280, 900)):
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    page.set_default_timeout(20_000)
    user.set_password("pw-for-the-browser")
    user.save()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "pw-for-the-browser")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


PHONE = (390, 844)
OVERFLOW = "document.documentElement.scrollWidth - window.innerWidth"
# The outermost elements that stick out on the right: what to fix when a page is too wide.
STICKING_OUT = """() => {
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.getBoundingClientRect().right <= window.innerWidth + 1) continue;
    let clipped = false;  // inside a box that scrolls or clips: the page does not widen
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== "visible") clipped = true;
    }
    if (clipped) continue;
    if (out.some((o) => o.contains(el))) continue;
    out.push(el);
  }
  return out.slice(0, 5).map((el) =>
    [el.tagName.toLowerCase(), ...el.classList].join(".") + " in " +
    (el.parentElement ? el.parentElement.tagName.toLowerCase() : ""));
}"""
