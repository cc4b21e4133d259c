"""The backfill, rewind and reprocess pages: the plan is shown first, a second click starts
it, and only the owning team's developers reach them."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from batches.models import BatchConsumpQueue, File
from processes.models import InstanceExec, Operation

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_backfill_page_shows_the_plan_then_starts_it(team, chain, queued, committed):
    client = _as(team.developer)
    page = client.get(f"/jobs/{chain.tidy.pk}/backfill/")
    assert page.status_code == 200 and b"Show the plan" in page.content
    today = str(timezone.localdate())
    plan = client.get(f"/jobs/{chain.tidy.pk}/backfill/", {"since": today, "until": today})
    text = plan.content.decode()
    assert plan.status_code == 200, text
    for target in chain.targets["tidy"] + chain.targets["report"]:
        assert f'/batches/{target}/">{target}</a>' in text
    assert "Start: build 4 batches again" in text
    assert not BatchConsumpQueue.objects.exists()  # the plan changes nothing
    with committed():
        started = client.post(
            f"/jobs/{chain.tidy.pk}/backfill/?since={today}&until={today}",
            {"since": today, "until": today},
        )
    run = InstanceExec.objects.filter(process=chain.tidy, trigger="backfill").get()
    # Its progress page: the operation, batch by batch, each with its run once started.
    operation = Operation.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/operations/{operation.pk}/"
    assert f'href="/runs/{run.pk}/"' in client.get(started["Location"]).content.decode()


def test_a_file_and_a_batch_are_reprocessed_from_their_pages(team, chain, queued, committed):
    client = _as(team.developer)
    batch_page = client.get(f"/batches/{chain.targets['tidy'][0]}/").content.decode()
    assert f"/batches/{chain.targets['tidy'][0]}/reprocess/" in batch_page
    file = File.objects.get(path__endswith="/a.csv")
    assert (
        f"/files/{file.pk}/reprocess/" in client.get(f"/batches/{file.batch_id}/").content.decode()
    )
    plan = client.get(f"/files/{file.pk}/reprocess/").content.decode()
    assert file.path in plan and "Start: build 2 batches again" in plan
    with committed():
        done = client.post(f"/files/{file.pk}/reprocess/")
    assert done.status_code == 302
    again = client.post(f"/files/{file.pk}/reprocess/")  # the plan now says it waits already
    assert (
        again.status_code == 200 and "being built or waits to be rebuilt" in again.content.decode()
    )


def test_the_rewind_page_asks_for_the_batch(team, chain, queued):
    step = chain.tidy.steps.get()
    client = _as(team.developer)
    assert f"/steps/{step.pk}/rewind/" in client.get(f"/jobs/{chain.tidy.pk}/").content.decode()
    bad = client.get(f"/steps/{step.pk}/rewind/", {"batch": "x"})
    assert bad.status_code == 200 and "Give valid values" in bad.content.decode()
    later = File.objects.get(path__endswith="/c.csv").batch_id
    plan = client.get(f"/steps/{step.pk}/rewind/", {"batch": later}).content.decode()
    assert "Start: build 2 batches again" in plan


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_only_the_owning_teams_developers_reach_the_pages(team, chain, queued, who, status):
    client = _as(getattr(team, who))
    file = File.objects.get(path__endswith="/a.csv")
    for url in (
        f"/jobs/{chain.tidy.pk}/backfill/",
        f"/steps/{chain.tidy.steps.get().pk}/rewind/",
        f"/batches/{chain.targets['tidy'][0]}/reprocess/",
        f"/files/{file.pk}/reprocess/",
        f"/steps/{chain.ingest.steps.get().pk}/reset-marker/",
    ):
        assert client.get(url).status_code == status, url
        assert client.post(url).status_code == status, url
    assert not BatchConsumpQueue.objects.exists()


def test_a_scan_step_s_marker_is_moved_back_from_the_job_page(team, chain, queued):
    from batches.models import ScanState

    scan = chain.ingest.steps.get()
    client = _as(team.developer)
    job_page = client.get(f"/jobs/{chain.ingest.pk}/").content.decode()
    assert f"/steps/{scan.pk}/reset-marker/" in job_page
    assert f"/steps/{scan.pk}/rewind/" not in job_page  # a scan consumes no queue
    assert ScanState.objects.get(process=scan).marker == "c.csv"

    plan = client.get(f"/steps/{scan.pk}/reset-marker/", {"key": "a.csv"}).content.decode()
    assert "c.csv" in plan and "a.csv" in plan
    assert "2 files after it are registered already" in plan  # listed, not registered again
    assert ScanState.objects.get(process=scan).marker == "c.csv"  # the plan changes nothing

    forward = client.get(f"/steps/{scan.pk}/reset-marker/", {"key": "z.csv"}).content.decode()
    assert "it only moves back" in forward and "Move the marker" not in forward

    done = client.post(f"/steps/{scan.pk}/reset-marker/?key=a.csv", {"key": "a.csv"})
    assert done.status_code == 302 and done["Location"] == f"/jobs/{chain.ingest.pk}/"
    assert ScanState.objects.get(process=scan).marker == "a.csv"
    files = File.objects.count()
    assert client.get(f"/jobs/{chain.ingest.pk}/").status_code == 200
    # The next scan lists b.csv and c.csv again and registers neither twice.
    from processes import orchestrator

    orchestrator.run_job(chain.ingest.pk)
    assert File.objects.count() == files
    assert ScanState.objects.get(process=scan).marker == "c.csv"


@pytest.mark.parametrize(
    "query",
    [
        {"since": "2024-02-30T10:00"},  # no such day
        {"key": "k" * 2000},
        {"key": "a\x00b"},
        {"key": "a", "since": "2026-11-27T10:00"},
    ],
)
def test_bad_input_on_the_marker_page_is_said_not_a_500(team, chain, queued, query):
    scan = chain.ingest.steps.get()
    client = _as(team.developer)
    for answer in (
        client.get(f"/steps/{scan.pk}/reset-marker/", query),
        client.post(f"/steps/{scan.pk}/reset-marker/", query),
    ):
        assert answer.status_code == 200
        text = answer.content.decode()
        assert "Give a key" in text or "at most 1024" in text or "NUL" in text
    # A job is no step with a marker.
    assert client.get(f"/steps/{chain.ingest.pk}/reset-marker/").status_code == 404
