from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connections

from tests.helpers.browser import CHROMIUM, SHOTS
from tests.helpers.jobs import build_job, callable_step
from tests.helpers.machine import skip_unless_required


@pytest.fixture
def pipeline(team):
    """A job of two ``python.callable`` steps in the team's application, run once."""
    from processes import orchestrator

    steps = [callable_step(name, "tests.processes.callables.sleep") for name in ("load", "report")]
    job = build_job(team, "clicks", steps)
    outcome = orchestrator.run_job(job.pk)
    return job, outcome


@pytest.fixture
def browser(monkeypatch):
    """Debian's Chromium, headless, driven by Playwright (tests/helpers/browser.py)."""
    if not Path(CHROMIUM).exists():
        skip_unless_required("Debian's chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test
    # itself are plain blocking calls all the same.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()
        # While Playwright's loop runs in this thread, Django keeps the test's connections
        # apart from the session's (asgiref's Local takes the thread for an async one):
        # closed here, while they are in view, or they outlive the session.
        connections.close_all()
