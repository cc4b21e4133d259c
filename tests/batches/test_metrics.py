"""The queue's metrics, counted from the database at the scrape: depth by state, the age of
the oldest waiting row, and the dead letters, per consuming step."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from batches.models import BatchState
from tests.helpers.factories import QueueRowFactory
from tests.helpers.metrics import scrape

pytestmark = pytest.mark.django_db


def test_depth_lag_and_dead_letters_of_a_consuming_step(team, make_job):
    upstream = make_job("clicks")
    sessions = make_job("sessions", upstream=[upstream])
    (step,) = sessions.steps.all()
    now = timezone.now()
    QueueRowFactory(process=step, insert_ts=now - timedelta(minutes=10))  # the oldest waiting
    QueueRowFactory(process=step, insert_ts=now - timedelta(minutes=1))
    QueueRowFactory(process=step, batch_state_id=BatchState.FAILED, insert_ts=now)
    QueueRowFactory(process=step, batch_state_id=BatchState.ACCESSED, insert_ts=now)
    for _ in range(2):  # older than any, but dead: not lag
        QueueRowFactory(
            process=step, batch_state_id=BatchState.DISCARDED, insert_ts=now - timedelta(days=3)
        )
    where = {("team", "analytics"), ("job_name", "sessions"), ("step_name", "sessions_s1")}
    found = scrape()

    def depth(state: str) -> float:
        return found[("bdre_queue_depth", frozenset(where | {("state", state)}))]

    assert (depth("new"), depth("failed"), depth("accessed")) == (2, 1, 1)
    assert found[("bdre_dead_letters", frozenset(where))] == 2
    assert 600 <= found[("bdre_queue_lag_seconds", frozenset(where))] < 660


def test_an_empty_consumer_reports_zeros_and_a_job_without_upstream_nothing(team, make_job):
    upstream = make_job("source")
    make_job("idle", upstream=[upstream])
    found = scrape()
    idle = {("team", "analytics"), ("job_name", "idle"), ("step_name", "idle_s1")}
    assert found[("bdre_queue_depth", frozenset(idle | {("state", "new")}))] == 0
    assert found[("bdre_queue_lag_seconds", frozenset(idle))] == 0
    assert found[("bdre_dead_letters", frozenset(idle))] == 0
    assert not [
        k for k in found if k[0].startswith("bdre_queue") and ("job_name", "source") in k[1]
    ]


def test_two_teams_steps_of_one_name_are_two_series(team, make_job):
    from tests.helpers.jobs import build_job

    upstream = make_job("feed")
    mine = make_job("orders", upstream=[upstream])
    theirs = build_job(team.other_application, "orders")  # its one step: orders_s1
    QueueRowFactory(process=mine.steps.get())
    QueueRowFactory(process=theirs.steps.get())
    found = scrape()
    for team_name in ("analytics", "marketing"):
        key = {("team", team_name), ("job_name", "orders"), ("step_name", "orders_s1")}
        assert found[("bdre_queue_depth", frozenset(key | {("state", "new")}))] == 1
