"""Jobs run by a real Celery worker with Beat: on the filesystem broker and SQLite by default,
on Redis and PostgreSQL when the suite runs against them (CI runs both). The tasks themselves:
Beat's schedule and reaper, and a killed worker's redelivered messages; the orchestrator's
decisions the tasks carry out are in test_orchestrator.py."""

from __future__ import annotations

import json
import re

import pytest
from django_celery_beat.models import PeriodicTask

from batches.models import HiveTable
from processes import orchestrator, schedules, tasks
from processes.models import ExecState, InstanceExec
from processes.schedules import Schedule
from tests.helpers.enriched import EventFactory
from tests.helpers.jobs import build_job, callable_step
from tests.helpers.pipelines import shred_pipeline
from tests.helpers.runs import finished_runs, runs_of
from tests.helpers.spark import published
from tests.helpers.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_a_scheduled_job_runs_by_itself_end_to_end(team, worker):
    job = build_job(team, "every_two_seconds", [callable_step("tick")])
    schedules.set_schedule(job.pk, Schedule(every_seconds=2))
    w = worker()
    runs = wait_for(lambda: finished_runs(job), 60, "a scheduled run", w)
    assert runs[0].exec_state_id == ExecState.SUCCESS
    (step_run,) = InstanceExec.objects.filter(parent=runs[0])
    assert step_run.exec_state_id == ExecState.SUCCESS
    assert step_run.worker.startswith("celery@")
    # Beat put the reaper in the schedule when it started.
    assert PeriodicTask.objects.filter(name=schedules.REAPER_NAME, enabled=True).exists()
    schedules.pause(job.pk)


def test_a_worker_killed_during_a_spark_step_loses_and_repeats_nothing(
    team, worker, tmp_path, settings, spark
):
    """SIGKILL the worker in the middle of spark.shred: the lease expires, the reaper
    terminates the run, the next run re-runs the same batch, and the atomic table holds
    every event exactly once."""
    landing = tmp_path / "landing"
    landing.mkdir()
    lines, unique = EventFactory(seed=11).batch(3000, natural=0.02, malformed=0.01)
    (landing / "events.tsv").write_text("\n".join(lines) + "\n")
    ingest, shred_job = shred_pipeline(team.application, landing, lease_seconds=6)
    assert orchestrator.run_job(ingest.pk).succeeded
    step = shred_job.steps.get(name="shred_events")

    first = worker()
    tasks.enqueue_run(shred_job.pk)
    wait_for(
        lambda: (
            runs_of(step).filter(exec_state_id=ExecState.RUNNING).exclude(spark_application_id="")
        ),
        180,
        "the Spark step to start",
        first,
    )
    first.kill()
    (killed,) = runs_of(shred_job)
    assert killed.exec_state_id == ExecState.RUNNING  # nobody knows yet

    second = worker()  # its Beat schedules the reaper
    wait_for(lambda: finished_runs(shred_job), 60, "the reaper", second)
    killed.refresh_from_db()
    assert killed.exec_state_id == ExecState.FAILED and "lease expired" in killed.error
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        # The embedded broker gave the killed worker's unacknowledged step back at once (Redis
        # does after its visibility timeout); redelivered, it is skipped: its step is still
        # running, or its run was reaped.
        assert re.search(r"restored \d+ unacknowledged messages", second.output())

    tasks.enqueue_run(shred_job.pk)
    runs = wait_for(lambda: (r := finished_runs(shred_job))[1:] and r, 240, "the re-run", second)
    rerun = runs[1]
    assert rerun.exec_state_id == ExecState.SUCCESS, rerun.error
    assert rerun.target_batch_id == killed.target_batch_id
    counters = runs_of(step).filter(exec_state_id=ExecState.SUCCESS).get().counters
    table = published(spark, HiveTable.objects.get(table_name="events").location)
    ids = [r.event_id for r in table.select("event_id").collect()]
    assert len(ids) == len(set(ids)) == counters["rows_out"] == len(unique)
    assert set(ids) == {e["event_id"] for e in unique}


def test_a_real_worker_with_json_logs_writes_the_step_lines_as_json_with_their_ids(team, worker):
    """Celery configures the worker's logging itself; the JSON format has to survive that,
    in the pool's child that runs the step."""
    job = build_job(team, "chatty", [callable_step("talk", "tests.processes.callables.log_a_line")])
    w = worker(BDRE_LOG_FORMAT="json")
    tasks.enqueue_run(job.pk)
    [run] = wait_for(lambda: finished_runs(job), 90, "the run", w)
    step_run = InstanceExec.objects.get(parent=run)

    def said() -> list[dict]:
        lines = [json.loads(line) for line in w.output().splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("logger") == "tests.step_body"]

    [line] = wait_for(said, 10, "the step's line in the worker's log", w)
    assert line["message"] == f"working on batch {run.target_batch_id}"
    assert (line["run_id"], line["step_run_id"]) == (run.pk, step_run.pk)
