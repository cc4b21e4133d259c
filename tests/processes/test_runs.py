"""A run's totals (duration, input batches, rows in and out) for the runs list and the runs
API, in a number of queries that does not grow with the runs; the API's run filters."""

from __future__ import annotations

from datetime import timedelta

import pytest

from batches.models import ArchiveConsumpQueue, BatchState
from processes import runs
from processes.models import ExecState, InstanceExec, Trigger
from tests.helpers.api import api_as
from tests.helpers.factories import BatchFactory, QueueRowFactory
from tests.helpers.runs import START, job_run, step_run

pytestmark = pytest.mark.django_db


def archived(step, source, target):
    return ArchiveConsumpQueue.objects.create(
        queue_id=0,
        source_batch=source,
        target_batch=target,
        process=step,
        insert_ts=START,
        batch_state_id=BatchState.PROCESSED,
    )


def test_a_job_run_counts_the_batches_it_claimed_and_sums_its_steps_rows(make_job):
    job = make_job("orders", steps=2)
    first, second = job.steps.order_by("id")
    run = job_run(job)
    target = run.target_batch
    # Two batches still claimed in the live queue (one a dead letter by now), one processed
    # and archived, and the same source batch claimed by both steps (counted once).
    claimed = QueueRowFactory(process=first, target_batch=target, batch_state_id=BatchState.FAILED)
    QueueRowFactory(process=first, target_batch=target, batch_state_id=BatchState.DISCARDED)
    archived(second, claimed.source_batch, target)
    archived(second, BatchFactory(), target)
    QueueRowFactory(process=first)  # waiting, claimed by no run
    step_run(run, first, rows_in=100, rows_out=90, bad_rows=10)
    step_run(run, second, rows_in=90, rows_out="ninety")  # a callable's free-form counter

    runs.attach_totals([run])

    assert run.batches_in == 4  # 2 live + 2 archived, each table's sources counted once
    assert (run.rows_in, run.rows_out) == (190, 90)
    assert run.duration_seconds == 90.0


def test_a_run_without_row_counters_has_none_and_a_running_one_lasts_until_now(make_job):
    job = make_job("scan")
    running = job_run(job, state=ExecState.RUNNING)
    step_run(running, job.steps.get(), files=3)

    runs.attach_totals([running], now=START + timedelta(minutes=5))

    assert running.rows_in is None and running.rows_out is None
    assert running.batches_in == 0
    assert running.duration_seconds == 300.0


def test_a_step_run_has_its_own_rows_and_no_input_batches(make_job):
    job = make_job("orders")
    run = job_run(job)
    step = step_run(run, job.steps.get(), rows_in=7, rows_out=5)

    runs.attach_totals([step])

    assert (step.batches_in, step.rows_in, step.rows_out) == (None, 7, 5)


def test_totals_take_the_same_queries_for_one_run_or_many(make_job, django_assert_num_queries):
    job = make_job("orders")
    many = []
    for i in range(12):
        run = job_run(job, start_ts=START + timedelta(hours=i))
        step_run(run, job.steps.get(), rows_in=i)
        QueueRowFactory(process=job.steps.get(), target_batch=run.target_batch)
        many.append(run)
    with django_assert_num_queries(3):
        runs.attach_totals(many[:1])
    with django_assert_num_queries(3):
        runs.attach_totals(many)
    assert [r.rows_in for r in many] == list(range(12))
    assert all(r.batches_in == 1 for r in many)


def test_the_trend_is_the_last_runs_oldest_first(make_job):
    job = make_job("orders")
    made = [job_run(job, seconds=i + 1) for i in range(35)]

    last = runs.trend(job.pk, last=30)

    assert [r.pk for r in last] == [r.pk for r in made[5:]]
    assert [r.duration_seconds for r in last] == [float(i + 1) for i in range(5, 35)]


def test_the_runs_api_lists_totals_and_filters_by_state_and_trigger(team, make_job):
    job = make_job("orders")
    ok = job_run(job, trigger=Trigger.SCHEDULE)
    step_run(ok, job.steps.get(), rows_in=10, rows_out=8)
    QueueRowFactory(process=job.steps.get(), target_batch=ok.target_batch)
    failed = job_run(job, state=ExecState.FAILED, trigger=Trigger.BACKFILL)
    client = api_as(team.viewer)

    listed = client.get("/api/v1/runs/", {"is_job": "true"}).json()["results"]
    by_id = {r["id"]: r for r in listed}
    assert (by_id[ok.pk]["batches_in"], by_id[ok.pk]["rows_in"], by_id[ok.pk]["rows_out"]) == (
        1,
        10,
        8,
    )
    assert by_id[ok.pk]["duration_seconds"] == 90.0
    assert by_id[failed.pk]["rows_in"] is None

    def ids(**params):
        answer = client.get("/api/v1/runs/", params)
        assert answer.status_code == 200, answer.content
        return {r["id"] for r in answer.json()["results"]}

    assert ids(state="FAILED") == {failed.pk}
    assert ids(trigger="backfill") == {failed.pk}
    assert ids(trigger="schedule", is_job="true") == {ok.pk}
    detail = client.get(f"/api/v1/runs/{ok.pk}/").json()
    assert detail["rows_out"] == 8 and detail["steps"][0]["rows_out"] == 8
    bad = client.get("/api/v1/runs/", {"state": "DONE"})
    assert bad.status_code == 400 and "state" in bad.json()


def test_an_outsider_gets_none_of_the_teams_runs_from_the_api(team, make_job):
    job = make_job("orders")
    run = job_run(job, state=ExecState.FAILED)
    outsider = api_as(team.outsider)

    assert outsider.get("/api/v1/runs/", {"state": "FAILED"}).json()["results"] == []
    assert outsider.get(f"/api/v1/runs/{run.pk}/").status_code == 404
    assert InstanceExec.objects.filter(pk=run.pk).exists()
