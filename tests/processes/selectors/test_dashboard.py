"""The dashboard's selectors: exact numbers per job and per hour, in a number of queries that
does not grow with the jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from batches.models import ArchiveConsumpQueue, BatchState
from processes import schedules
from processes.models import ExecState, Process
from processes.selectors import dashboard
from tests.helpers.factories import InstanceExecFactory, QueueRowFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 21, 12, 30, tzinfo=UTC)  # the last bucket is 12:00 to 13:00


def jobs() -> list[Process]:
    return list(Process.objects.filter(parent__isnull=True).order_by("name"))


def archived(step, insert_ts, end_ts, state=BatchState.PROCESSED) -> ArchiveConsumpQueue:
    row = QueueRowFactory.build(process=step)
    row.source_batch.save()
    return ArchiveConsumpQueue.objects.create(
        queue_id=0,
        source_batch=row.source_batch,
        process=step,
        insert_ts=insert_ts,
        end_ts=end_ts,
        batch_state_id=state,
    )


def test_each_hour_counts_its_runs_and_the_batches_waiting_at_its_end(make_job):
    job = make_job("clicks")
    step = job.steps.get()
    for end, state in (
        (NOW - timedelta(minutes=20), ExecState.SUCCESS),  # 12:10, last bucket
        (NOW - timedelta(minutes=25), ExecState.FAILED),
        (NOW - timedelta(hours=2), ExecState.SUCCESS),  # 10:30
        (NOW - timedelta(hours=30), ExecState.SUCCESS),  # before the 24 hours
    ):
        InstanceExecFactory(process=job, start_ts=end, end_ts=end, exec_state_id=state)
    # Waiting in the live queue since 09:45, still waiting.
    QueueRowFactory(process=step, insert_ts=NOW - timedelta(hours=2, minutes=45))
    # Archived: waited from 10:15 to 11:40, so it was waiting at 11:00 only.
    archived(step, NOW - timedelta(hours=2, minutes=15), NOW - timedelta(minutes=50))
    # A discarded batch is not waiting.
    QueueRowFactory(
        process=step, insert_ts=NOW - timedelta(hours=5), batch_state_id=BatchState.DISCARDED
    )

    buckets = dashboard.hourly(Process.objects.all(), now=NOW)

    assert len(buckets) == 24
    assert buckets[-1].start == datetime(2026, 11, 21, 12, tzinfo=UTC)
    by_start = {b.start.hour: (b.succeeded, b.failed, b.queued) for b in buckets}
    assert by_start[12] == (1, 1, 1)  # at 13:00 only the live row waits
    assert by_start[11] == (0, 0, 1)  # at 12:00 the archived row has ended
    assert by_start[10] == (1, 0, 2)  # at 11:00 both wait
    assert by_start[9] == (0, 0, 1)  # at 10:00 only the live row
    assert by_start[8] == (0, 0, 0)
    assert sum(b.succeeded for b in buckets) == 2


def test_job_rows_show_each_jobs_schedule(make_job):
    timed, chained, manual = make_job("a_timed"), make_job("b_chained"), make_job("c_manual")
    schedules.set_schedule(timed.pk, schedules.Schedule(every_seconds=60))
    schedules.set_schedule(chained.pk, schedules.Schedule(on_upstream=True))
    rows = {r.job.name: r for r in dashboard.job_rows(Process.objects.all())}
    assert rows["a_timed"].schedule == "every 60 s" and rows["a_timed"].next_run is not None
    assert rows["b_chained"].schedule == "after upstream" and rows["b_chained"].next_run is None
    assert rows["c_manual"].schedule == "manual"
    assert manual.pk in {r.job.pk for r in rows.values()}


def test_the_dashboard_queries_do_not_grow_with_the_jobs(make_job):
    def count_queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            dashboard.job_rows(Process.objects.all(), now=NOW)
            dashboard.hourly(Process.objects.all(), now=NOW)
        return len(captured)

    first = make_job("first")
    schedules.set_schedule(first.pk, schedules.Schedule(every_seconds=60))
    few = count_queries()
    for n in range(5):
        job = make_job(f"more{n}")
        schedules.set_schedule(job.pk, schedules.Schedule(cron="0 * * * *"))
        QueueRowFactory(process=job.steps.get(), insert_ts=NOW - timedelta(hours=n))
    assert count_queries() == few
