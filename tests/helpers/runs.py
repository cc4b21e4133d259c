"""Runs: rows written as a run leaves them (for the lists, totals and charts), and the runs a
job has."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from processes.models import ExecState, InstanceExec, Process, Trigger
from tests.helpers.factories import BatchFactory, InstanceExecFactory

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def job_run(job, *, seconds=90.0, state=ExecState.SUCCESS, trigger=Trigger.SCHEDULE, **kw):
    start = kw.pop("start_ts", START)
    return InstanceExecFactory(
        process=job,
        start_ts=start,
        end_ts=None if state == ExecState.RUNNING else start + timedelta(seconds=seconds),
        exec_state_id=state,
        trigger=trigger,
        target_batch=kw.pop("target_batch", None) or BatchFactory(bus_domain=job.bus_domain),
        **kw,
    )


def step_run(run, step, **counters):
    return InstanceExecFactory(
        process=step, parent=run, start_ts=run.start_ts, end_ts=run.end_ts, counters=counters
    )


def runs_of(process: Process):
    return InstanceExec.objects.filter(process=process).order_by("id")


def finished_runs(job: Process) -> list[InstanceExec]:
    return list(runs_of(job).exclude(exec_state_id=ExecState.RUNNING))
