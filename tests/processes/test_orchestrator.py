"""The orchestrator's decisions, on real Celery workers: which steps are ready (independent
branches in parallel, a join after both), a failure ending the run and the re-run resuming
at it, the jobs that run on their upstream's output, terminate, and the jobs' time limit.
The Celery tasks themselves (Beat, redelivery, the reaper) are in test_tasks.py. The
heartbeat that keeps a step's leases while it works, in this process."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from processes import lifecycle, orchestrator, schedules, step_kinds, tasks
from processes.models import ExecState, InstanceExec, Property
from processes.schedules import Schedule
from tests.helpers.broker_clients import wait_until
from tests.helpers.jobs import build_job, callable_step
from tests.helpers.lifecycle import steps_of
from tests.helpers.runs import finished_runs, runs_of
from tests.helpers.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_independent_steps_run_in_parallel(team, worker):
    sleep = "tests.processes.callables.sleep"
    job = build_job(
        team,
        "fan_out",
        [
            callable_step("first"),
            callable_step("left", sleep, sleep="3"),
            callable_step("right", sleep, sleep="3"),
            callable_step("join"),
        ],
        links={
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
    job = build_job(
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
    upstream = build_job(team, "producer", [callable_step("produce")])
    downstream = build_job(team, "consumer", [callable_step("consume", upstream=[upstream])])
    schedules.set_schedule(downstream.pk, Schedule(on_upstream=True))
    w = worker()
    tasks.enqueue_run(upstream.pk)
    (run,) = wait_for(lambda: finished_runs(downstream), 60, "the triggered run", w)
    assert run.exec_state_id == ExecState.SUCCESS, run.error
    (produced,) = finished_runs(upstream)
    consumed = run.step_runs.get()
    assert consumed.target_batch_id == run.target_batch_id
    assert produced.exec_state_id == ExecState.SUCCESS


def test_a_paused_job_set_to_follow_its_upstream_is_not_started_when_the_upstream_succeeds(
    team,
):
    upstream = build_job(team, "producer", [callable_step("produce")])
    followers = {}
    for name in ("paused_consumer", "live_consumer"):
        followers[name] = build_job(team, name, upstream=[upstream])
        schedules.set_schedule(followers[name].pk, Schedule(every_seconds=3600, on_upstream=True))
    schedules.pause(followers["paused_consumer"].pk)
    started = orchestrator.start(upstream.pk)
    (step_id,) = started.ready
    assert orchestrator.execute_step(started.instance_exec_id, step_id).state == "succeeded"
    advanced = orchestrator.advance(started.instance_exec_id)
    assert advanced.finished
    assert advanced.downstream == [followers["live_consumer"].pk]


@pytest.mark.spark  # the step runs Spark in the worker
def test_terminate_cancels_the_spark_work_and_fails_the_run(team, worker, tmp_path):
    outcome = tmp_path / "outcome"
    job = build_job(
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


def test_a_step_over_the_jobs_time_limit_fails_the_run(team, worker):
    job = build_job(
        team, "too_slow", [callable_step("dawdle", "tests.processes.callables.sleep", sleep="30")]
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


def test_a_job_that_only_follows_its_upstream_is_paused_and_resumed(team, sent):
    upstream = build_job(team, "producer", [callable_step("produce")])
    follower = build_job(team, "follower", [callable_step("follow", upstream=[upstream])])
    schedules.set_schedule(follower.pk, Schedule(on_upstream=True))
    shown = schedules.pause(follower.pk)
    assert shown.paused and shown.on_upstream

    def upstream_run() -> list[int]:
        started = orchestrator.start(upstream.pk)
        (step_id,) = started.ready
        assert orchestrator.execute_step(started.instance_exec_id, step_id).state == "succeeded"
        return orchestrator.advance(started.instance_exec_id).downstream

    assert upstream_run() == []
    assert schedules.resume(follower.pk).paused is False
    assert upstream_run() == [follower.pk]


def test_a_run_sent_before_the_pause_does_not_start_after_it(team, sent):
    job = build_job(team, "nightly", [callable_step("only")])
    schedules.set_schedule(job.pk, Schedule(every_seconds=3600))
    # Beat sent the run, then the job was paused before a worker took the message.
    schedules.pause(job.pk)
    for trigger in ("schedule", "upstream"):
        answer = tasks.run_process.apply(args=(job.pk,), kwargs={"trigger": trigger}).get()
        assert answer == {"process_id": job.pk, "started": False, "outcome": "paused"}
    assert not InstanceExec.objects.filter(process=job).exists()


# --- the heartbeat, in this process ----------------------------------------------------------


def _running_step(make_job, name: str) -> tuple[int, int]:
    """A job run and its step's run, started as a worker starts them."""
    job = make_job(name)
    job_run = lifecycle.init_job(job.pk).instance_exec_id
    return job_run, lifecycle.init_step(steps_of(job)[0].pk, instance_exec_id=job_run)


def _heartbeats(runs: tuple[int, int]) -> dict[int, object]:
    return dict(InstanceExec.objects.filter(pk__in=runs).values_list("pk", "heartbeat_at"))


def _beaten_since(runs: tuple[int, int], before: dict[int, object]) -> bool:
    now = _heartbeats(runs)
    return all(now[pk] != before[pk] for pk in runs)


def test_a_heartbeat_renews_the_leases_of_the_job_run_and_the_step_run(make_job):
    runs = _running_step(make_job, "beating")
    before = _heartbeats(runs)
    with orchestrator.Heartbeat(*runs, every=0.01) as beat:
        assert wait_until(lambda: _beaten_since(runs, before), timeout=30, every=0.01)
    assert not beat.lost.is_set()


def test_a_heartbeat_that_fails_is_tried_again_at_the_next_beat(make_job, monkeypatch):
    """A database hiccup (a lock, a dropped connection) is no lost lease: the step goes on."""
    runs = _running_step(make_job, "hiccup")
    before = _heartbeats(runs)
    renew, failed = lifecycle.heartbeat, []

    def hiccup_once(run_id: int):
        if not failed:
            failed.append(run_id)
            raise OperationalError("database is locked")
        return renew(run_id)

    monkeypatch.setattr(lifecycle, "heartbeat", hiccup_once)
    with orchestrator.Heartbeat(*runs, every=0.01) as beat:
        assert wait_until(lambda: _beaten_since(runs, before), timeout=30, every=0.01)
    assert failed and not beat.lost.is_set()


def test_a_step_whose_run_is_terminated_while_it_works_is_cancelled_and_fails(
    team, monkeypatch, settings, tmp_path
):
    """The heartbeat finds the lease lost and cancels the step's work until it stops; the
    step fails as terminated, and its run and job run stay as the termination left them."""
    settings.BDRE_HEARTBEAT_SECONDS = 0.01
    cancelled = tmp_path / "cancelled"
    monkeypatch.setattr(step_kinds, "cancel_running_work", cancelled.touch)
    body = "tests.processes.callables.terminated_while_working"
    job = build_job(team, "stopped", [callable_step("work", body, flag=str(cancelled))])
    job_run = lifecycle.init_job(job.pk).instance_exec_id

    outcome = orchestrator.execute_step(job_run, steps_of(job)[0].pk)

    assert outcome.state == "failed"
    assert outcome.error == "terminated while running (RuntimeError: cancelled)"
    run = InstanceExec.objects.get(pk=job_run)
    assert (run.exec_state_id, run.error) == (ExecState.FAILED, "terminated by a user")
    step_run = InstanceExec.objects.get(pk=outcome.step_run_id)
    assert step_run.exec_state_id == ExecState.FAILED
