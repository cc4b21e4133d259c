"""Jobs run by a real Celery worker with Beat: on the filesystem broker and SQLite by default,
on Redis and PostgreSQL when the suite runs against them (CI runs both)."""

from __future__ import annotations

import re

import pytest
from django_celery_beat.models import PeriodicTask

from batches.models import HiveTable
from processes import orchestrator, schedules, tasks
from processes.models import ExecState, InstanceExec, Process, Property
from processes.registry import StepSpec, create_job
from processes.schedules import Schedule
from tests.data.enriched import EventFactory
from tests.factories import JOB_TYPE
from tests.processes.pipelines import shred_pipeline
from tests.processes.workers import Worker, purge_broker, wait_for, worker_env

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
CALL = 51


@pytest.fixture
def worker(tmp_path, settings):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    purge_broker()
    workers: list[Worker] = []

    def start(**env: str) -> Worker:
        w = Worker(tmp_path / f"worker{len(workers)}.log", worker_env(tmp_path, **env)).start()
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.stop()


def callable_step(name: str, path: str = "", **test: str) -> StepSpec:
    properties = {"callable": {"path": path}} if path else {}
    if test:
        properties["test"] = test
    return StepSpec(name, CALL, properties=properties)


def job_of(team, name: str, steps: list[StepSpec], links: dict[str, list[str]] | None = None):
    """A job whose steps follow ``links`` (step name -> next step names); chained in order
    when no links are given."""
    job = create_job(bus_domain=team.application, name=name, process_type_id=JOB_TYPE, steps=steps)
    if links is not None:
        by_name = {s.name: s for s in job.steps.all()}
        job.next_processes.set([by_name[n] for n in links.get(name, [])])
        for step in by_name.values():
            step.next_processes.set([by_name[n] for n in links.get(step.name, [])])
    return job


def runs_of(process: Process):
    return InstanceExec.objects.filter(process=process).order_by("id")


def finished_runs(job: Process) -> list[InstanceExec]:
    return list(runs_of(job).exclude(exec_state_id=ExecState.RUNNING))


def test_a_scheduled_job_runs_by_itself_end_to_end(team, worker):
    job = job_of(team, "every_two_seconds", [callable_step("tick")])
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


def test_independent_steps_run_in_parallel(team, worker):
    sleep = "tests.processes.callables.sleep"
    job = job_of(
        team,
        "fan_out",
        [
            callable_step("first"),
            callable_step("left", sleep, sleep="3"),
            callable_step("right", sleep, sleep="3"),
            callable_step("join"),
        ],
        links={
            "fan_out": ["first"],
            "first": ["left", "right"],
            "left": ["join"],
            "right": ["join"],
        },
    )
    w = worker()
    tasks.enqueue_run(job.pk)
    (run,) = wait_for(lambda: finished_runs(job), 90, "the fan-out run", w)
    assert run.exec_state_id == ExecState.SUCCESS, run.error
    steps = {r.process.name: r for r in InstanceExec.objects.filter(parent=run)}
    assert set(steps) == {"first", "left", "right", "join"}
    left, right = steps["left"], steps["right"]
    assert left.start_ts < right.end_ts and right.start_ts < left.end_ts  # they overlapped
    assert steps["join"].start_ts >= max(left.end_ts, right.end_ts)
    assert steps["first"].end_ts <= min(left.start_ts, right.start_ts)
    assert {left.worker, right.worker} == {steps["first"].worker}  # one worker, two processes


def test_a_failing_step_terminates_the_job_and_the_rerun_resumes_there(team, worker, tmp_path):
    flag = tmp_path / "flag"
    job = job_of(
        team,
        "flaky",
        [
            callable_step("prepare"),
            callable_step("fragile", "tests.processes.callables.fail_until_flag", flag=str(flag)),
            callable_step("publish"),
        ],
    )
    w = worker()
    tasks.enqueue_run(job.pk)
    (failed,) = wait_for(lambda: finished_runs(job), 60, "the failing run", w)
    assert failed.exec_state_id == ExecState.FAILED
    assert "is not there yet" in failed.error
    first = {r.process.name: r.exec_state_id for r in InstanceExec.objects.filter(parent=failed)}
    assert first == {"prepare": ExecState.SUCCESS, "fragile": ExecState.FAILED}

    flag.touch()
    tasks.enqueue_run(job.pk)
    runs = wait_for(lambda: (r := finished_runs(job))[1:] and r, 60, "the re-run", w)
    rerun = runs[1]
    assert rerun.exec_state_id == ExecState.SUCCESS, rerun.error
    assert rerun.target_batch_id == failed.target_batch_id
    second = sorted(r.process.name for r in InstanceExec.objects.filter(parent=rerun))
    assert second == ["fragile", "publish"]  # "prepare" succeeded already: skipped


def test_a_job_set_to_follow_its_upstream_runs_when_a_batch_is_queued_for_it(team, worker):
    upstream = job_of(team, "producer", [callable_step("produce")])
    downstream = create_job(
        bus_domain=team.application,
        name="consumer",
        process_type_id=JOB_TYPE,
        steps=[StepSpec("consume", CALL, upstream=[upstream.pk])],
    )
    schedules.set_schedule(downstream.pk, Schedule(on_upstream=True))
    w = worker()
    tasks.enqueue_run(upstream.pk)
    (run,) = wait_for(lambda: finished_runs(downstream), 60, "the triggered run", w)
    assert run.exec_state_id == ExecState.SUCCESS, run.error
    (produced,) = finished_runs(upstream)
    consumed = run.step_runs.get()
    assert consumed.target_batch_id == run.target_batch_id
    assert produced.exec_state_id == ExecState.SUCCESS


@pytest.mark.spark  # the step runs Spark in the worker
def test_terminate_cancels_the_spark_work_and_fails_the_run(team, worker, tmp_path):
    outcome = tmp_path / "outcome"
    job = job_of(
        team,
        "long_spark",
        [callable_step("crunch", "tests.processes.callables.slow_spark_job", outcome=str(outcome))],
    )
    w = worker()
    tasks.enqueue_run(job.pk)
    step = job.steps.get()
    wait_for(
        lambda: (
            runs_of(step).filter(exec_state_id=ExecState.RUNNING).exclude(spark_application_id="")
        ),
        120,
        "the Spark step to start",
        w,
    )
    orchestrator.terminate(job.pk, "stop it")
    (run,) = finished_runs(job)
    assert run.exec_state_id == ExecState.FAILED and run.error == "stop it"
    assert runs_of(step).get().exec_state_id == ExecState.FAILED
    text = wait_for(lambda: outcome.exists() and outcome.read_text(), 30, "the cancellation", w)
    assert text.startswith("cancelled")


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
    table = spark.read.parquet(HiveTable.objects.get(table_name="events").location)
    ids = [r.event_id for r in table.select("event_id").collect()]
    assert len(ids) == len(set(ids)) == counters["rows_out"] == len(unique)
    assert set(ids) == {e["event_id"] for e in unique}


def test_a_step_over_the_jobs_time_limit_fails_the_run(team, worker):
    job = job_of(
        team,
        "too_slow",
        [callable_step("dawdle", "tests.processes.callables.sleep", sleep="30")],
    )
    Property.objects.create(
        process=job, config_group="run", key="time_limit_seconds", value="2", description=""
    )
    w = worker()
    tasks.enqueue_run(job.pk)
    (run,) = wait_for(lambda: finished_runs(job), 60, "the time limit", w)
    assert run.exec_state_id == ExecState.FAILED
    assert "SoftTimeLimitExceeded" in run.error
    assert (run.end_ts - run.start_ts).total_seconds() < 20
