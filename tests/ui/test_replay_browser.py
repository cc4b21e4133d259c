"""In a real browser: a developer picks a bad file on its batch's page,
reads the plan (which batches are built again, which partitions replaced), starts it, and
lands on the run that rebuilds. Screenshots go to ``var/screenshots/`` (``reprocess-*.png``)."""

from __future__ import annotations

import pytest

from batches.models import File
from processes.models import InstanceExec
from tests.helpers.browser import log_in, shot

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
]


def test_a_developer_reprocesses_a_file_from_its_batch_page(
    team, live_server, browser, chain, queued
):
    bad = File.objects.get(path__endswith="/a.csv")
    page = log_in(browser, live_server, team.developer, viewport=(1100, 800))
    page.goto(f"{live_server.url}/batches/{bad.batch_id}/")
    page.click(f"a[href='/files/{bad.pk}/reprocess/']")
    plan = page.locator("table.replay-plan tbody tr")
    assert plan.count() == 2
    assert plan.nth(0).inner_text().split("\t")[:2] == ["tidy", str(chain.targets["tidy"][0])]
    assert plan.nth(1).inner_text().split("\t")[:2] == ["report", str(chain.targets["report"][0])]
    shot(page, "reprocess-plan")
    page.click("text=Start: build 2 batches again")
    run = InstanceExec.objects.get(process=chain.tidy, trigger="reprocess")
    page.wait_for_url(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("dd.trigger").inner_text() == "reprocess"
    shot(page, "reprocess-run")
