"""Quiet scans: a scheduled, upstream-triggered or "run now" run of a job whose first step
scans starts only when the scan has something new to register; a check that finds nothing
leaves no run and no batch, only the job's "last checked" (docs/operations.md)."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from batches.ingest.storage import LocalStorage
from batches.models import Batch, BatchConsumpQueue, File, ScanState
from bdre.errors import BdreError
from processes import orchestrator, scan_gate, tasks
from processes.models import ExecState, InstanceExec, Process
from tests.helpers.admin import act, texts
from tests.helpers.api import api_as
from tests.helpers.concurrency import in_children
from tests.helpers.factories import grant_root
from tests.helpers.jobs import build_job, callable_step, scan_step


def _ingest(team, landing: Path, **scan: str) -> Process:
    grant_root(team.group, landing)  # what the installation's superuser did
    return build_job(team, "ingest", [scan_step("scan", landing, **scan)])


@pytest.fixture
def landing(tmp_path) -> Path:
    folder = tmp_path / "landing"
    folder.mkdir()
    return folder


@pytest.fixture
def ingest(team, landing, make_job) -> tuple[Process, Process, Process]:
    """The ingest job scanning ``landing``, its scan step, and a job consuming its files."""
    job = _ingest(team, landing)
    consumer = make_job("load", upstream=[job])
    return job, job.steps.get(), consumer.steps.get()


def land(landing: Path, name: str, text: str = "event\n") -> None:
    """A file landing as an uploader writes it: under a name the scan passes over, then
    renamed."""
    partial = landing / f"_{name}"
    partial.write_text(text)
    partial.rename(landing / name)


def tick(job: Process, sent: list, capture: Callable) -> dict:
    """One firing of the job's schedule (Beat's task, as a worker runs it), then the steps it
    sent to the workers, run here as a worker would."""
    with capture(execute=True):
        result = tasks.run_process(job.pk)
    while sent:
        args, _ = sent.pop(0)
        if len(args) == 2 and InstanceExec.objects.filter(pk=args[0]).exists():
            with capture(execute=True):
                tasks.run_step(*args)
    return result


def listing_then(action: Callable[[], None], monkeypatch, *, times: int = 1) -> None:
    """Make the next ``times`` listings of a local folder do ``action`` once they are done
    (a check stops at the first new file): a file lands, or another trigger runs, right
    after a listing."""
    pages = LocalStorage.pages
    left = [times]

    def listed_then_act(self, start_after: str = "", page_size: int = 1000) -> Iterator:
        try:
            yield from pages(self, start_after, page_size)
        finally:  # listed to its end, or left once a new file was seen
            if left[0] > 0:
                left[0] -= 1
                action()

    monkeypatch.setattr(LocalStorage, "pages", listed_then_act)


@pytest.mark.django_db
def test_a_file_younger_than_the_minimum_age_is_said_with_when_it_will_be_ready(
    team, landing, sent, django_capture_on_commit_callbacks
):
    job = _ingest(team, landing, min_age_seconds="600")
    land(landing, "a.tsv")
    landed = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    os.utime(landing / "a.tsv", (landed.timestamp(), landed.timestamp()))
    (landing / "b.tsv_current").write_text("half an event")

    result = tick(job, sent, django_capture_on_commit_callbacks)
    assert result["outcome"] == "nothing_new"
    ready = landed + timedelta(seconds=600)
    assert ScanState.objects.get(process=job.steps.get()).last_check["detail"] == (
        "nothing new: 2 keys listed, 2 not ready yet (1 younger than the scan's minimum age, "
        f"the first ready at {ready:%H:%M:%S} UTC; 1 still being written)"
    )


@pytest.mark.django_db
def test_scheduled_scans_with_nothing_new_start_no_run_until_a_file_lands(
    ingest, landing, sent, django_capture_on_commit_callbacks
):
    job, step, consumer = ingest
    batches = Batch.objects.count()
    for _ in range(3):
        result = tick(job, sent, django_capture_on_commit_callbacks)
        assert result == {"process_id": job.pk, "started": False, "outcome": "nothing_new"}
    assert not InstanceExec.objects.exists()
    assert Batch.objects.count() == batches
    state = ScanState.objects.get(process=step)
    assert state.quiet_checks == 3 and state.marker == ""
    assert state.last_check["outcome"] == "nothing_new" and state.last_check["listed"] == 0

    # A file still being written is listed, and waits: still nothing new.
    (landing / "b.tsv_current").write_text("half an event")
    tick(job, sent, django_capture_on_commit_callbacks)
    state.refresh_from_db()
    assert state.last_check["listed"] == 1 and state.last_check["not_ready"] == 1
    assert state.last_check["detail"] == (
        "nothing new: 1 key listed, 1 not ready yet (1 still being written)"
    )
    assert not InstanceExec.objects.exists() and Batch.objects.count() == batches

    land(landing, "a.tsv")
    result = tick(job, sent, django_capture_on_commit_callbacks)
    (run,) = InstanceExec.objects.filter(process=job)
    assert result == {"process_id": job.pk, "started": True, "run": run.pk}
    run.refresh_from_db()
    assert run.exec_state_id == ExecState.SUCCESS, run.error
    (registered,) = File.objects.all()
    assert registered.path == (landing / "a.tsv").as_uri()
    # One run: its own batch and the file's, queued for the consumer.
    assert Batch.objects.count() == batches + 2
    assert list(
        BatchConsumpQueue.objects.filter(process=consumer).values_list("source_batch", flat=True)
    ) == [registered.batch_id]
    state.refresh_from_db()
    assert state.last_check["outcome"] == "started" and state.last_check["run"] == run.pk
    assert state.marker == "a.tsv"

    # The next ticks: nothing new again, and nothing made.
    tick(job, sent, django_capture_on_commit_callbacks)
    assert InstanceExec.objects.filter(process=job).count() == 1
    assert Batch.objects.count() == batches + 2
    state.refresh_from_db()
    assert state.quiet_checks == 5 and state.last_check["outcome"] == "nothing_new"


@pytest.mark.django_db
def test_a_file_landing_just_after_the_checks_listing_is_found_by_the_next_check(
    ingest, landing, sent, django_capture_on_commit_callbacks, monkeypatch
):
    job, step, _ = ingest
    listing_then(lambda: land(landing, "late.tsv"), monkeypatch)
    assert tick(job, sent, django_capture_on_commit_callbacks)["started"] is False
    assert (landing / "late.tsv").exists() and not File.objects.exists()
    assert ScanState.objects.get(process=step).marker == ""  # the check moved nothing

    assert tick(job, sent, django_capture_on_commit_callbacks)["started"] is True
    assert list(File.objects.values_list("path", flat=True)) == [(landing / "late.tsv").as_uri()]


@pytest.mark.django_db
def test_a_file_landing_between_the_check_and_the_run_is_registered_by_the_run(
    ingest, landing, sent, django_capture_on_commit_callbacks, monkeypatch
):
    job, _, _ = ingest
    land(landing, "a.tsv")
    listing_then(lambda: land(landing, "b.tsv"), monkeypatch)  # after the check's listing
    assert tick(job, sent, django_capture_on_commit_callbacks)["started"] is True
    assert sorted(File.objects.values_list("path", flat=True)) == [
        (landing / "a.tsv").as_uri(),
        (landing / "b.tsv").as_uri(),
    ]
    assert InstanceExec.objects.filter(process=job).count() == 1


@pytest.mark.django_db
def test_a_trigger_whose_check_another_run_overtook_stands_down(
    ingest, landing, sent, django_capture_on_commit_callbacks, monkeypatch
):
    """Two triggers at once, in the order that would make an empty run: the second one
    lists and sees the new file, the first one's whole run registers it, then the second
    one would start. It sees a run newer than its check, and starts none."""
    job, step, _ = ingest
    land(landing, "a.tsv")
    overtaking: list[orchestrator.RunOutcome] = []
    listing_then(lambda: overtaking.append(orchestrator.run_job(job.pk)), monkeypatch)
    result = tick(job, sent, django_capture_on_commit_callbacks)
    (run,) = InstanceExec.objects.filter(process=job)
    assert overtaking[0].succeeded and overtaking[0].instance_exec_id == run.pk
    assert result == {"process_id": job.pk, "started": False, "outcome": "ran_meanwhile"}
    assert File.objects.count() == 1
    check = ScanState.objects.get(process=step).last_check
    assert check["run"] == run.pk and check["new"] == 1


def _trigger(job_id: int) -> str:
    """One trigger of the job, in a process of its own; the run it starts is run to its end
    at once, so that a late trigger finds it finished rather than running."""
    try:
        started = tasks.start_run(job_id)
        if isinstance(started, scan_gate.Quiet):
            return started.outcome
        for step_id in started.ready:
            orchestrator.execute_step(started.instance_exec_id, step_id)
        orchestrator.advance(started.instance_exec_id)
        return "started"
    except BdreError as error:
        return str(int(error.code))


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize("triggers", [2, 4])
def test_triggers_firing_at_once_in_parallel_processes_start_one_run(
    ingest, landing, sent, triggers
):
    job, _, consumer = ingest
    land(landing, "a.tsv")
    outcomes = in_children(_trigger, [(job.pk,)] * triggers)
    assert outcomes.count("started") == 1, outcomes
    assert set(outcomes) <= {"started", "104", "ran_meanwhile", "nothing_new"}, outcomes
    (run,) = InstanceExec.objects.filter(process=job)
    assert run.exec_state_id == ExecState.SUCCESS, run.error
    assert File.objects.count() == 1
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 1


# --- which jobs are checked ------------------------------------------------------------------


@pytest.mark.django_db
def test_only_a_job_whose_first_steps_scan_and_that_consumes_nothing_is_checked(
    team, landing, make_job
):
    job = _ingest(team, landing)
    assert [s.name for s in scan_gate.gating_scans(job)] == ["scan"]
    plain = build_job(team, "plain", [callable_step("tick")])
    assert scan_gate.gating_scans(plain) == []
    consuming = make_job("consumer", upstream=[job])
    assert scan_gate.gating_scans(consuming) == []


@pytest.mark.django_db
def test_a_job_that_does_not_scan_runs_on_every_trigger(
    team, sent, django_capture_on_commit_callbacks
):
    job = build_job(team, "plain", [callable_step("tick")])
    result = tick(job, sent, django_capture_on_commit_callbacks)
    assert result["started"] is True
    assert InstanceExec.objects.filter(process=job).count() == 1


@pytest.mark.django_db
def test_a_failed_scan_is_run_again_on_the_next_trigger_without_a_check(
    ingest, landing, sent, django_capture_on_commit_callbacks
):
    job, _, _ = ingest
    land(landing, "a.tsv")
    landing.rename(landing.with_name("gone"))
    assert tick(job, sent, django_capture_on_commit_callbacks)["started"] is True
    (failed,) = InstanceExec.objects.filter(process=job)
    assert failed.exec_state_id == ExecState.FAILED and "not a readable folder" in failed.error
    landing.with_name("gone").rename(landing)
    assert tick(job, sent, django_capture_on_commit_callbacks)["started"] is True
    rerun = InstanceExec.objects.filter(process=job).order_by("-id").first()
    assert rerun.exec_state_id == ExecState.SUCCESS and File.objects.count() == 1


@pytest.mark.django_db
def test_a_late_key_below_the_marker_is_found_when_the_reconciliation_is_due(
    team, landing, sent, django_capture_on_commit_callbacks
):
    """Checks count for the reconciliation cadence, so a location where nothing new lands
    after the marker still gets its late keys registered."""
    job = _ingest(team, landing, reconcile_every="3")
    land(landing, "b.tsv")
    assert tick(job, sent, django_capture_on_commit_callbacks)["started"] is True  # scan 1
    land(landing, "a.tsv")  # below the marker "b.tsv": late
    assert tick(job, sent, django_capture_on_commit_callbacks)["outcome"] == "nothing_new"
    state = ScanState.objects.get(process__parent=job)
    assert state.scans == 2 and not state.last_check["reconciled"]
    assert tick(job, sent, django_capture_on_commit_callbacks)["started"] is True  # due
    assert File.objects.filter(path=(landing / "a.tsv").as_uri()).exists()
    state.refresh_from_db()
    assert state.last_check["reconciled"] and state.last_check["new"] == 1


# --- run now: the API, the page --------------------------------------------------------------


@pytest.mark.django_db
def test_run_now_with_nothing_new_answers_200_and_starts_nothing(team, ingest, sent):
    job, _, _ = ingest
    response = api_as(team.developer).post(f"/api/v1/processes/{job.pk}/run/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["started"] is False and body["outcome"] == "nothing_new"
    assert body["detail"] == "nothing new: 0 keys listed" and body["run"] is None
    assert (
        body["last_checked"]["steps"][0]["location"]
        == ingest[0].steps.get().properties.get(key="location").value
    )
    assert not InstanceExec.objects.exists() and sent == []


@pytest.mark.django_db
def test_run_now_with_a_new_file_answers_201_with_the_new_run(
    team, ingest, landing, sent, django_capture_on_commit_callbacks
):
    job, step, _ = ingest
    land(landing, "a.tsv")
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(team.developer).post(f"/api/v1/processes/{job.pk}/run/")
    assert response.status_code == 201, response.content
    run = InstanceExec.objects.get(process=job)
    assert response.json() == {
        "run": run.pk,
        "url": f"http://testserver/api/v1/runs/{run.pk}/",
        "page": f"http://testserver/runs/{run.pk}/",
        "target_batch_id": run.target_batch_id,
        "is_rerun": False,
    }
    assert sent == [((run.pk, step.pk), {"queue": "celery"})]


@pytest.mark.django_db
def test_the_process_api_shows_the_last_check_to_the_team_only(team, ingest, landing, sent):
    job, _, _ = ingest
    (landing / "x.tsv_current").write_text("half")
    api_as(team.developer).post(f"/api/v1/processes/{job.pk}/run/")
    checked = api_as(team.viewer).get(f"/api/v1/processes/{job.pk}/").json()["last_checked"]
    assert checked["outcome"] == "nothing_new" and checked["quiet_checks"] == 1
    assert checked["steps"][0]["listed"] == 1 and checked["steps"][0]["not_ready"] == 1
    # Another team's developer neither sees it nor can make the job check its location.
    assert api_as(team.outsider).get(f"/api/v1/processes/{job.pk}/").status_code == 404
    assert api_as(team.outsider).post(f"/api/v1/processes/{job.pk}/run/").status_code == 404
    assert ScanState.objects.get(process__parent=job).quiet_checks == 1


@pytest.mark.django_db
def test_a_job_never_checked_has_no_last_check(team, make_job):
    job = make_job("plain")
    assert api_as(team.viewer).get(f"/api/v1/processes/{job.pk}/").json()["last_checked"] is None


@pytest.mark.django_db
def test_the_job_page_says_when_it_was_last_checked_and_run_now_says_nothing_new(
    client, team, ingest, sent
):
    job, _, _ = ingest
    client.force_login(team.developer)
    response = client.post(f"/jobs/{job.pk}/run/", follow=True)
    html = response.content.decode()
    assert "No run of ingest started: nothing new: 0 keys listed." in html
    assert "last checked" in html and "quiet checks" in html
    assert not InstanceExec.objects.exists()


@pytest.mark.django_db
def test_the_admins_run_now_says_which_jobs_had_nothing_new(
    client, superuser, team, ingest, make_job, sent, django_capture_on_commit_callbacks
):
    job, _, _ = ingest
    plain = make_job("plain")
    client.force_login(superuser)
    with django_capture_on_commit_callbacks(execute=True):
        response = act(client, "run_now", job, plain)
    assert texts(response) == [
        "ingest: no run started, nothing new: 0 keys listed",
        "Started: plain",
    ]
    assert list(InstanceExec.objects.values_list("process", flat=True)) == [plain.pk]


@pytest.mark.django_db
def test_run_process_from_the_shell_says_no_run_started_and_exits_0(ingest, sent):
    job, _, _ = ingest
    out = io.StringIO()
    call_command("run_process", "--process-id", str(job.pk), stdout=out)  # no SystemExit: 0
    assert json.loads(out.getvalue()) == {
        "run": None,
        "started": False,
        "outcome": "nothing_new",
        "detail": "nothing new: 0 keys listed",
    }
    assert not InstanceExec.objects.exists()


@pytest.mark.django_db
def test_a_scan_that_keeps_finding_nothing_reports_no_growing_lag(
    ingest, landing, sent, django_capture_on_commit_callbacks
):
    """A quiet check lists the location as a scan does: the metric of how long ago a scan
    last listed it must not grow while the checks keep finding nothing."""
    from tests.helpers.metrics import labels, scrape

    job, step, _ = ingest
    land(landing, "a.tsv")
    tick(job, sent, django_capture_on_commit_callbacks)  # the run that registers a.tsv
    an_hour_ago = timezone.now() - timedelta(hours=1)
    ScanState.objects.filter(process=step).update(last_scan_ts=an_hour_ago)
    result = tick(job, sent, django_capture_on_commit_callbacks)
    assert result["outcome"] == "nothing_new"
    where = labels(team="analytics", job_name="ingest", step_name="scan")
    assert scrape()[("bdre_scan_last_run_age_seconds", where)] < 60
