"""In a real browser: a developer picks a bad file on its batch's page,
reads the plan (which batches are built again, which partitions replaced), names and starts
it, lands on the operation's progress, and follows it to the run that rebuilds. Screenshots
go to ``var/screenshots/`` (``reprocess-*.png``)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from batches.models import File
from processes.models import InstanceExec, Operation
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
    expect(plan).to_have_count(2)  # waits for the page the click opens
    assert plan.nth(0).inner_text().split("\t")[:2] == ["tidy", str(chain.targets["tidy"][0])]
    assert plan.nth(1).inner_text().split("\t")[:2] == ["report", str(chain.targets["report"][0])]
    shot(page, "reprocess-plan")
    page.fill("input[name=name]", "a.csv had a bad row")
    page.click("text=Start: build 2 batches again")
    operation = Operation.objects.get()
    page.wait_for_url(f"{live_server.url}/operations/{operation.pk}/")
    assert page.locator("h1").inner_text() == "a.csv had a bad row"
    assert "0 of 2 done" in page.locator(".operation-progress").inner_text()
    batches = page.locator("table.operation-batches tbody tr")
    assert [batches.nth(i).inner_text().split("\t")[:3] for i in range(2)] == [
        ["running", "tidy", str(chain.targets["tidy"][0])],
        ["waiting", "report", str(chain.targets["report"][0])],
    ]
    shot(page, "reprocess-operation")
    run = InstanceExec.objects.get(process=chain.tidy, trigger="reprocess")
    page.click(f"table.operation-batches a[href='/runs/{run.pk}/']")
    page.wait_for_url(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("dd.trigger").inner_text() == "reprocess"
    shot(page, "reprocess-run")
