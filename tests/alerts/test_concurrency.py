"""The rate limit under real parallel processes on the real test database: two workers
raising the same alert at once send it once (the gate's row lock)."""

from __future__ import annotations

import multiprocessing
import time

import pytest
from django.db import connections

from alerts import services
from alerts.models import Alert, AlertGate
from tests.helpers.alerts import alerting

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

FORK = multiprocessing.get_context("fork")


def _raise_at(job_id: int, start_at: float) -> int:
    connections.close_all()
    time.sleep(max(0.0, start_at - time.time()))
    try:
        return len(services.raise_alert("failure", job_id, detail="boom"))
    finally:
        connections.close_all()


def _gate_at(job_id: int, start_at: float) -> int | None:
    connections.close_all()
    time.sleep(max(0.0, start_at - time.time()))
    try:
        return services.pass_gate(job_id, "failure")
    finally:
        connections.close_all()


def in_children(target, args_list: list[tuple]) -> list:
    connections.close_all()
    with FORK.Pool(len(args_list)) as pool:
        return pool.starmap(target, args_list)


def test_six_workers_raising_one_alert_at_once_send_one_email(make_job, smtp):
    job = alerting(make_job("contended", max_retries=10), email="ops@example.com")
    start_at = time.time() + 2
    sent = in_children(_raise_at, [(job.pk, start_at)] * 6)
    assert sorted(sent) == [0, 0, 0, 0, 0, 1]
    assert len(smtp.messages) == 1
    assert Alert.objects.filter(job=job).count() == 1
    assert AlertGate.objects.get(job=job, kind="failure").suppressed == 5


def test_eight_processes_at_a_new_gate_let_exactly_one_through(make_job):
    job = make_job("fresh-gate")
    start_at = time.time() + 2
    outcomes = in_children(_gate_at, [(job.pk, start_at)] * 8)
    assert outcomes.count(0) == 1 and outcomes.count(None) == 7
    gate = AlertGate.objects.get(job=job, kind="failure")
    assert gate.suppressed == 7 and gate.last_sent_at is not None
