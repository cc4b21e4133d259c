"""Backfill, rewind, reprocess and catch-up as named, tracked operations
(processes/operations.py): each start is recorded with what was asked and its plan, and its
page and the API follow it batch by batch to done; batches are picked by day, input label
and file name, not by internal ids; a job added downstream of one that ran before it existed
catches up on that job's batches, each once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from batches.models import ArchiveConsumpQueue, BatchConsumpQueue, BatchState, File
from bdre.errors import BdreError
from processes import operations, orchestrator, replay, schedules
from processes.models import Operation
from tests.helpers.api import api_as
from tests.helpers.factories import grant_root
from tests.helpers.jobs import build_job, callable_step, scan_step
from tests.helpers.lifecycle import code_of

pytestmark = pytest.mark.django_db


def test_a_named_reprocess_is_followed_batch_by_batch_to_done(
    team, chain, queued, drive, committed
):
    first_tidy, first_report = chain.targets["tidy"][0], chain.targets["report"][0]
    file = File.objects.get(path__endswith="/a.csv")
    client = api_as(team.developer)
    with committed():
        started = client.post(
            f"/api/v1/files/{file.pk}/reprocess/", {"name": "a.csv fixed"}, format="json"
        )
    assert started.status_code == 202, started.content
    operation_id = started.json()["operation"]
    assert started.json()["operation_page"].endswith(f"/operations/{operation_id}/")

    answer = client.get(f"/api/v1/operations/{operation_id}/").json()
    assert (answer["name"], answer["kind"], answer["created_by"]) == (
        "a.csv fixed",
        "reprocess",
        team.developer.username,
    )
    assert (answer["done"], answer["total"], answer["finished"]) == (0, 2, False)
    assert [(s["batch_id"], s["level"], s["state"]) for s in answer["steps"]] == [
        (first_tidy, 0, "running"),  # its run started with the request
        (first_report, 1, "waiting"),
    ]
    drive()
    assert orchestrator.run_job(chain.report.pk).succeeded  # report follows by hand here

    done = client.get(f"/api/v1/operations/{operation_id}/").json()
    assert (done["done"], done["finished"]) == (2, True)
    assert all(s["run_id"] for s in done["steps"])
    client.force_login(team.viewer)
    page = client.get(f"/operations/{operation_id}/").content.decode()
    assert "a.csv fixed" in page and "2 of 2 done" in page
    assert f'href="/runs/{done["steps"][1]["run_id"]}/"' in page
    assert "data-refresh" not in page, "a finished operation's page stops refreshing"
    listed = client.get("/operations/").content.decode()
    assert f'<a href="/operations/{operation_id}/">a.csv fixed</a>' in listed
    assert ">2/2<" in listed


def test_an_operation_started_on_a_page_opens_its_progress_with_a_name_of_what_was_asked(
    team, chain, queued, client
):
    client.force_login(team.developer)
    today = timezone.localdate().isoformat()
    # The plan's form posts back what was asked, and a name left empty.
    answer = client.post(
        f"/jobs/{chain.tidy.pk}/backfill/", {"since": today, "until": today, "name": ""}
    )
    operation = Operation.objects.get()
    assert answer.status_code == 302 and answer.url == f"/operations/{operation.pk}/"
    assert operation.name == f"backfill of tidy: {today}"
    assert operation.asked == {"since": today, "until": today}
    page = client.get(answer.url).content.decode()
    assert "0 of 4 done" in page and "data-refresh" in page


def test_another_teams_operation_is_not_found(team, chain, queued):
    replay.put_back(replay.plan_reprocess_batch(chain.targets["report"][0]))
    operation = Operation.objects.get()
    outsider = api_as(team.outsider)
    assert outsider.get(f"/api/v1/operations/{operation.pk}/").status_code == 404
    assert outsider.get("/api/v1/operations/").json()["count"] == 0


def test_a_backfill_picks_the_batches_made_of_input_with_a_label(chain):
    first_tidy, second_tidy = chain.targets["tidy"]
    ArchiveConsumpQueue.objects.filter(target_batch_id=first_tidy).update(
        batch_marking="late@2026-11-20"
    )
    today = timezone.localdate()
    week = today - timedelta(days=7)
    plan = replay.plan_backfill(chain.tidy.pk, week, today, label="LATE")
    assert plan.first == [first_tidy]
    assert second_tidy in replay.plan_backfill(chain.tidy.pk, week, today).first
    refused = code_of(replay.plan_backfill, chain.tidy.pk, week, today, label="EOD")
    assert refused == 112


def test_a_rewind_from_a_day_starts_at_its_first_input_batch(chain):
    step = chain.tidy.steps.get()
    today = timezone.localdate()
    plan = replay.plan_rewind(step.pk, since=today)
    assert [r.target_batch_id for r in plan.rebuilds if r.level == 0] == chain.targets["tidy"]
    assert code_of(replay.plan_rewind, step.pk, since=today + timedelta(days=1)) == 112


def test_a_new_job_downstream_catches_up_on_the_batches_delivered_before_it_existed(
    team, chain, queued, drive, committed, client
):
    audit = build_job(team, "audit", [callable_step("audit_0", upstream=[chain.tidy])])
    step = audit.steps.get()
    yesterday = timezone.localdate() - timedelta(days=1)
    # A rewind has nothing to consume again: the job never consumed anything.
    assert code_of(replay.plan_rewind, step.pk, since=yesterday) == 112

    planned = operations.plan_catch_up(audit.pk, yesterday)
    assert [(c.step, c.upstream, c.batch_id) for c in planned] == [
        ("audit_0", "tidy", batch) for batch in chain.targets["tidy"]
    ]
    client.force_login(team.viewer)
    assert client.post(f"/jobs/{audit.pk}/catch-up/", {"since": yesterday}).status_code == 403
    client.force_login(team.developer)
    rewind = client.get(f"/steps/{step.pk}/rewind/?from_day={yesterday}").content.decode()
    assert f'<a href="/jobs/{audit.pk}/catch-up/">Catch the job up</a>' in rewind
    preview = client.get(f"/jobs/{audit.pk}/catch-up/?since={yesterday}").content.decode()
    assert "Start: queue 2 batches and run the job" in preview
    assert not BatchConsumpQueue.objects.filter(process=step).exists(), "a preview queues nothing"

    with committed():
        answer = client.post(f"/jobs/{audit.pk}/catch-up/", {"since": yesterday, "name": "audit"})
    operation = Operation.objects.get(kind=Operation.Kind.CATCH_UP)
    assert answer.url == f"/operations/{operation.pk}/"
    # The run it started claimed both (a job takes every batch waiting, unless max_batch).
    assert operations.progress(operation).summary == "0 of 2 done · 2 running"
    drive()
    assert operations.progress(operation).finished
    consumed = ArchiveConsumpQueue.objects.filter(process=step)
    assert sorted(consumed.values_list("source_batch_id", flat=True)) == chain.targets["tidy"]
    # Each once: nothing left to catch up, and tidy's next batch is queued as new.
    assert code_of(operations.plan_catch_up, audit.pk, yesterday) == 112
    assert (
        not BatchConsumpQueue.objects.filter(process=step)
        .exclude(batch_state_id=BatchState.DISCARDED)
        .exists()
    )


def test_a_job_downstream_of_a_scan_catches_up_on_its_files_batches(team, tmp_path, settings):
    landing = tmp_path / "files"
    landing.mkdir()
    grant_root(team.group, landing)
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    for name in ("x.csv", "y.csv"):
        (landing / name).write_text(f"{name}\n")
    assert orchestrator.run_job(ingest.pk).succeeded  # no consumer yet: nothing queued
    load = build_job(team, "load", [callable_step("load_0", upstream=[ingest])])

    planned = operations.plan_catch_up(load.pk, timezone.localdate() - timedelta(days=1))
    names = File.objects.filter(batch_id__in=[c.batch_id for c in planned]).values_list(
        "path", flat=True
    )
    assert sorted(n.rsplit("/", 1)[-1] for n in names) == ["x.csv", "y.csv"]
    # Each with the marking the scan gives a file's batch: the day of the file.
    assert {c.marking for c in planned} == {timezone.localdate().isoformat()}


def test_a_catch_up_never_queues_another_teams_batches_nor_names_its_job(team, chain):
    theirs = build_job(team.other_application, "their_tidy")
    audit = build_job(team, "audit", [callable_step("audit_0", upstream=[chain.tidy])])
    audit.steps.get().enqueuing_processes.add(theirs)  # a link the registry would refuse now
    with pytest.raises(BdreError) as refused:
        operations.plan_catch_up(audit.pk, timezone.localdate())
    assert refused.value.code == 120 and "their_tidy" not in refused.value.message


def test_a_catch_up_of_a_paused_job_queues_and_says_it_waits_for_the_resume(
    team, chain, queued, client
):
    audit = build_job(team, "audit", [callable_step("audit_0", upstream=[chain.tidy])])
    schedules.pause(audit.pk)
    client.force_login(team.developer)
    answer = client.post(f"/jobs/{audit.pk}/catch-up/", {"since": timezone.localdate()})
    assert answer.status_code == 302
    page = client.get(answer.url).content.decode()
    assert "2 batches queued; no run now" in page and "paused" in page
    assert BatchConsumpQueue.objects.filter(process__parent=audit).count() == 2
