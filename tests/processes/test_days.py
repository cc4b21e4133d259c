"""Closing days (processes/days.py): by the clock, once a day's end and its job's grace
have passed, and what registration refuses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from batches.models import BatchState
from processes import days, lifecycle, orchestrator, schedules
from tests.helpers.lifecycle import code_of, queued, run_job, run_marked, steps_of

pytestmark = pytest.mark.django_db


def test_a_day_is_closed_once_its_end_and_the_jobs_grace_have_passed(make_job):
    # An empty property of the job's beside it (no later-day close) changes nothing.
    shred = make_job("shred", properties={"run": {"close_days_grace_hours": "2", "close_days": ""}})
    daily = make_job("daily", upstream=[shred], cut="EOD@")
    schedules.set_schedule(daily.pk, schedules.Schedule(on_upstream=True))
    (step,) = steps_of(daily)
    day = [run_marked(shred, "2026-11-20") for _ in range(2)]
    run_marked(shred, "2026-11-21")

    assert orchestrator.close_due_days(datetime(2026, 11, 21, 1, 59, tzinfo=UTC)) == []
    assert code_of(lifecycle.init_job, daily.pk) == 109  # within the grace: still open
    # Past it, the day closes, and the daily job is the one to run now.
    assert orchestrator.close_due_days(datetime(2026, 11, 21, 2, 0, tzinfo=UTC)) == [daily.pk]
    assert [row.batch_marking for row in queued(step, BatchState.NEW)] == [
        "2026-11-20",
        "2026-11-20,EOD@2026-11-20",
        "2026-11-21",
    ]
    assert run_job(daily).steps[step.pk].batch_ids == day
    # Closed once: the next tick finds nothing to close.
    assert orchestrator.close_due_days(datetime(2026, 11, 21, 3, 0, tzinfo=UTC)) == []


def test_a_job_without_a_grace_closes_no_day_by_the_clock(make_job):
    shred = make_job("shred", properties={"run": {"close_days": "on_later_day"}})
    daily = make_job("daily", upstream=[shred], cut="EOD@")
    run_marked(shred, "2026-11-20")
    assert days.close_due_days(datetime(2026, 12, 31, tzinfo=UTC)) == []
    assert [row.batch_marking for row in queued(steps_of(daily)[0])] == ["2026-11-20"]


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("close_days", "at_midnight", "'on_later_day' (the first batch of a later day"),
        ("close_days_grace_hours", "two", "a number of hours from 0 to 720"),
        ("close_days_grace_hours", "-1", "a number of hours from 0 to 720"),
    ],
)
def test_registration_refuses_a_day_close_no_job_could_follow(make_job, key, value, says):
    with pytest.raises(ValidationError) as refused:
        make_job("shred", properties={"run": {key: value}})
    assert says in str(refused.value)
    assert f"run.{key} is {value!r}" in str(refused.value)
