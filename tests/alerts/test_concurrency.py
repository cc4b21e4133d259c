"""The rate limit under real parallel processes on the real test database: two workers
raising the same alert at once send it once (the gate's row lock)."""

from __future__ import annotations

import pytest

from alerts import services
from alerts.models import Alert, AlertGate
from tests.helpers.alerts import alerting
from tests.helpers.concurrency import in_children

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def _raise(job_id: int) -> int:
    return len(services.raise_alert("failure", job_id, detail="boom"))


def _gate(job_id: int) -> int | None:
    return services.pass_gate(job_id, "failure")


def test_six_workers_raising_one_alert_at_once_send_one_email(make_job, smtp):
    job = alerting(make_job("contended", max_retries=10), email="ops@example.com")
    sent = in_children(_raise, [(job.pk,)] * 6)
    assert sorted(sent) == [0, 0, 0, 0, 0, 1]
    assert len(smtp.messages) == 1
    assert Alert.objects.filter(job=job).count() == 1
    assert AlertGate.objects.get(job=job, kind="failure").suppressed == 5


def test_eight_processes_at_a_new_gate_let_exactly_one_through(make_job):
    job = make_job("fresh-gate")
    outcomes = in_children(_gate, [(job.pk,)] * 8)
    assert outcomes.count(0) == 1 and outcomes.count(None) == 7
    gate = AlertGate.objects.get(job=job, kind="failure")
    assert gate.suppressed == 7 and gate.last_sent_at is not None
