"""The batches' admin: the queue's filters, and its actions call the queue service."""

from __future__ import annotations

import pytest

from batches.models import BatchConsumpQueue, BatchState
from tests.helpers.admin import action, url
from tests.helpers.factories import JobFactory, QueueRowFactory, StepFactory

pytestmark = pytest.mark.django_db


def test_queue_can_be_filtered_by_process_and_state(client, superuser, team):
    row = QueueRowFactory(process=StepFactory(parent=JobFactory(bus_domain=team.application)))
    other = QueueRowFactory()
    client.force_login(superuser)
    page = client.get(
        url(type(row), "changelist"),
        {"process__id__exact": row.process_id, "batch_state__id__exact": 0},
    )
    assert page.status_code == 200
    assert list(page.context["cl"].queryset) == [row]
    assert other not in page.context["cl"].queryset


def test_the_requeue_admin_action_goes_through_the_queue_service(
    client, superuser, team, monkeypatch
):
    from batches import queue

    step = StepFactory(parent=JobFactory(bus_domain=team.application))
    dead = QueueRowFactory(process=step, batch_state_id=BatchState.DISCARDED, attempts=3)
    new = QueueRowFactory(process=step, batch_state_id=BatchState.NEW)
    called = []
    real = queue.requeue
    monkeypatch.setattr(queue, "requeue", lambda pk: called.append(pk) or real(pk))
    client.force_login(superuser)
    page = action(client, BatchConsumpQueue, "requeue", dead.pk, new.pk)
    assert sorted(called) == sorted([dead.pk, new.pk])
    dead.refresh_from_db()
    assert (dead.batch_state_id, dead.attempts) == (BatchState.NEW, 0)
    # The service's own check answers, as it does through the API: a NEW row is refused.
    assert "only failed or discarded rows can be requeued" in page.content.decode()
    assert BatchConsumpQueue.objects.get(pk=new.pk).batch_state_id == BatchState.NEW


def test_the_discard_admin_action_goes_through_the_queue_service(client, superuser, team):
    row = QueueRowFactory(process=StepFactory(parent=JobFactory(bus_domain=team.application)))
    client.force_login(superuser)
    action(client, BatchConsumpQueue, "discard", row.pk)
    row.refresh_from_db()
    assert row.batch_state_id == BatchState.DISCARDED
    assert row.discard_reason == "discarded by root: in the admin"
    assert row.last_error == ""  # the row never failed: discarding writes no error
