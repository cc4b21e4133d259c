"""The registry's metrics: step durations observed when a real step run ends, a shred's
counters, runs by job and state and the scans' lags counted at the scrape."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from batches.models import ScanState
from processes import orchestrator
from processes.metrics import observe_step_run
from processes.models import ExecState, InstanceExec
from tests.helpers.factories import InstanceExecFactory, JobFactory, StepFactory
from tests.helpers.jobs import SCAN, SHRED, build_job, callable_step
from tests.helpers.metrics import labels, scrape

pytestmark = pytest.mark.django_db


def test_each_step_run_adds_its_duration_under_the_state_it_ended_in(
    team, tmp_path, django_capture_on_commit_callbacks
):
    job = build_job(
        team,
        "metered",
        [
            callable_step("works", "processes.examples.noop"),
            callable_step(
                "breaks", "tests.processes.callables.fail_until_flag", flag=str(tmp_path / "no")
            ),
        ],
    )
    step = {"team": "analytics", "job_name": "metered", "kind": "python.callable"}
    works = labels(**step, step_name="works", state="success")
    breaks = labels(**step, step_name="breaks", state="failed")
    count = "bdre_step_run_duration_seconds_count"
    before = scrape()
    with django_capture_on_commit_callbacks(execute=True):
        assert not orchestrator.run_job(job.pk).succeeded
    after = scrape()
    assert after[(count, works)] - before.get((count, works), 0) == 1
    assert after[(count, breaks)] - before.get((count, breaks), 0) == 1
    # Not a run id in sight: one series per step, however many runs.
    assert not any("run" in name for (_, labelset) in after for name, _ in labelset)


def test_a_shred_run_counts_its_events_bad_rows_and_duplicates(team):
    job = JobFactory(name="shredder", bus_domain=team.application)
    step = StepFactory(name="shred", parent=job, process_type_id=SHRED)
    start = timezone.now() - timedelta(seconds=42)
    run = InstanceExecFactory(
        process=step,
        start_ts=start,
        end_ts=start + timedelta(seconds=42),
        exec_state_id=ExecState.SUCCESS,
        counters={
            "rows_in": 1000,
            "rows_out": 990,
            "bad_rows": 7,
            "dup_in_batch_natural": 2,
            "dup_cross_batch_natural": 1,
            "tables": 5,
        },
    )
    where = labels(team="analytics", job_name="shredder", step_name="shred")
    before = scrape()
    observe_step_run(run.pk)
    after = scrape()

    def grew(name: str, extra: frozenset = frozenset()) -> float:
        key = (name, where | extra)
        return after[key] - before.get(key, 0)

    assert grew("bdre_shred_events_read_total") == 1000
    assert grew("bdre_shred_events_written_total") == 990
    assert grew("bdre_shred_bad_rows_total") == 7
    assert grew("bdre_shred_duplicates_total", labels(strategy="in_batch_natural")) == 2
    assert grew("bdre_shred_duplicates_total", labels(strategy="cross_batch_natural")) == 1
    duration = labels(kind="spark.shred", state="success")
    assert grew("bdre_step_run_duration_seconds_sum", duration) == pytest.approx(42)


def test_a_step_run_counts_each_expectation_that_failed_rows(team):
    job = JobFactory(name="reports", bus_domain=team.application)
    step = StepFactory(name="report", parent=job, process_type_id=SHRED)
    run = InstanceExecFactory(
        process=step,
        end_ts=timezone.now(),
        exec_state_id=ExecState.FAILED,
        checks=[
            {"table": "orders", "rule": "one_each", "action": "fail", "failed": 2},
            {"table": "orders", "rule": "positive", "action": "drop", "failed": 0},
        ],
    )
    rule = labels(team="analytics", job_name="reports", step_name="report", table="orders")
    failing, passing = (
        rule | labels(rule="one_each", action="fail"),
        rule | labels(rule="positive", action="drop"),
    )
    before = scrape()
    observe_step_run(run.pk)
    after = scrape()
    assert (
        after[("bdre_expectation_failures_total", failing)]
        - before.get(("bdre_expectation_failures_total", failing), 0)
        == 1
    )
    assert (
        after[("bdre_expectation_failed_rows_total", failing)]
        - before.get(("bdre_expectation_failed_rows_total", failing), 0)
        == 2
    )
    assert ("bdre_expectation_failures_total", passing) not in after


def test_runs_are_counted_by_job_and_state_at_the_scrape(team):
    job = JobFactory(name="counted", bus_domain=team.application)
    other = JobFactory(name="counted", bus_domain=team.other_application)  # another team's
    for state in (ExecState.SUCCESS, ExecState.SUCCESS, ExecState.FAILED):
        InstanceExecFactory(process=job, exec_state_id=state)
    InstanceExecFactory(process=other, exec_state_id=ExecState.RUNNING)
    InstanceExecFactory(process=StepFactory(parent=job), exec_state_id=ExecState.FAILED)
    found = scrape()
    runs = {
        dict(key)["state"]: value
        for (name, key), value in found.items()
        if name == "bdre_runs"
        and dict(key)["job_name"] == "counted"
        and dict(key)["team"] == "analytics"
    }
    assert runs == {"success": 2, "failed": 1}  # job runs only, not the step's
    assert found[("bdre_runs", labels(team="marketing", job_name="counted", state="running"))] == 1


def test_a_deleted_job_leaves_the_runs_gauge(team):
    job = JobFactory(name="gone", bus_domain=team.application, deleted=True)
    InstanceExecFactory(process=job)
    assert not [k for k in scrape() if k[0] == "bdre_runs" and ("job_name", "gone") in k[1]]


def test_a_scan_reports_how_long_ago_it_listed_and_last_found_a_file(team):
    job = JobFactory(name="landing", bus_domain=team.application)
    scan = StepFactory(name="scan", parent=job, process_type_id=SCAN)
    now = timezone.now()
    ScanState.objects.create(
        process=scan, location="file:///in", last_scan_ts=now - timedelta(seconds=30)
    )
    found_one = now - timedelta(hours=2)
    InstanceExecFactory(
        process=scan, start_ts=found_one, end_ts=found_one, counters={"registered": 3}
    )
    InstanceExecFactory(process=scan, start_ts=now, end_ts=now, counters={"registered": 0})
    where = labels(team="analytics", job_name="landing", step_name="scan")
    found = scrape()
    assert 30 <= found[("bdre_scan_last_run_age_seconds", where)] < 90
    assert 7200 <= found[("bdre_scan_last_new_file_age_seconds", where)] < 7260


def test_a_scan_that_never_found_a_file_has_no_last_find(team):
    scan = StepFactory(
        name="idle_scan",
        parent=JobFactory(name="idle", bus_domain=team.application),
        process_type_id=SCAN,
    )
    InstanceExecFactory(process=scan, end_ts=timezone.now(), counters={"registered": 0})
    assert not [
        k
        for k in scrape()
        if k[0] == "bdre_scan_last_new_file_age_seconds" and ("step_name", "idle_scan") in k[1]
    ]


def test_the_end_of_a_job_run_is_not_a_step_duration(team, django_capture_on_commit_callbacks):
    job = build_job(team, "solo", [callable_step("only", "processes.examples.noop")])
    with django_capture_on_commit_callbacks(execute=True):
        outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded
    series = [
        dict(key)["step_name"]
        for (name, key) in scrape()
        if name == "bdre_step_run_duration_seconds_count" and dict(key)["job_name"] == "solo"
    ]
    assert series == ["only"]
    assert InstanceExec.objects.filter(process=job).count() == 1
