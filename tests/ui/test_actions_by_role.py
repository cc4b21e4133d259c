"""Every action of the UI forged by each role of the team and by an outsider: the roles
below the one it needs get 403, an outsider 404 (he may not know the record exists), and
nothing changes."""

from __future__ import annotations

import pytest

from batches.models import BatchState
from processes import registry, schedules
from processes.models import ProcessTemplate
from tests.helpers.factories import QueueRowFactory
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db

NEEDS = {"viewer": 0, "developer": 1, "admin": 2}


@pytest.fixture
def records(team, pipeline, sent):
    job, _ = pipeline
    schedules.set_schedule(job.pk, schedules.Schedule(every_seconds=60))
    step = job.steps.order_by("id").first()
    template = registry.template_from_job(job, name="tmpl")
    return {
        "job": job,
        "failed": QueueRowFactory(process=step, batch_state_id=BatchState.FAILED),
        "template": template,
    }


ACTIONS = [
    # (name, role needed, url, data)
    ("run now", "developer", "/jobs/{job}/run/", {}),
    ("terminate", "developer", "/jobs/{job}/terminate/", {}),
    ("pause", "developer", "/jobs/{job}/pause/", {}),
    ("resume", "developer", "/jobs/{job}/resume/", {}),
    ("schedule", "developer", "/jobs/{job}/schedule/", {"every_seconds": 5, "timezone": "UTC"}),
    ("save template", "developer", "/jobs/{job}/save-template/", {"name": "copy"}),
    ("requeue", "developer", "/queue/{failed}/requeue/", {}),
    ("discard", "developer", "/queue/{failed}/discard/", {"reason": "forged"}),
    ("delete template", "admin", "/templates/{template}/delete/", {}),
]


def state(records) -> tuple:
    records["failed"].refresh_from_db()
    schedule = schedules.schedule_of(records["job"].pk)
    return (
        (schedule.every_seconds, schedule.enabled),  # next_run moves with the clock
        records["failed"].batch_state_id,
        ProcessTemplate.objects.filter(deleted=False, parent=None).count(),
    )


REFUSED = [
    (who, *action)
    for action in ACTIONS
    for who in ("viewer", "developer", "outsider")
    if who == "outsider" or NEEDS[who] < NEEDS[action[1]]
]


@pytest.mark.parametrize(
    ("who", "name", "needs", "url", "data"), REFUSED, ids=[f"{r[1]}-{r[0]}" for r in REFUSED]
)
def test_an_action_below_its_role_is_refused_and_changes_nothing(
    team, records, sent, who, name, needs, url, data
):
    target = url.format(
        job=records["job"].pk, failed=records["failed"].pk, template=records["template"].pk
    )
    before = state(records)
    answer = client_as(getattr(team, who)).post(target, data)
    assert answer.status_code == (404 if who == "outsider" else 403)
    assert state(records) == before
    assert sent == []


@pytest.mark.parametrize("who", ["viewer", "outsider"])
def test_registration_pages_need_a_developer_somewhere(team, who):
    client = client_as(getattr(team, who))
    expected = 403 if who == "viewer" else 200  # the outsider develops in his own team
    assert client.get("/jobs/new/").status_code == expected
    assert client.get("/jobs/from-template/").status_code == expected
