"""Run now, terminate and schedules through REST, as each role of the team and an outsider."""

from __future__ import annotations

import pytest

from processes import lifecycle, schedules
from processes.models import ExecState, InstanceExec
from tests.helpers.api import api_as

pytestmark = pytest.mark.django_db


def test_a_developer_runs_a_job_now_and_gets_the_new_runs_id(
    team, make_job, sent, django_capture_on_commit_callbacks
):
    job = make_job("nightly")
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(team.developer).post(f"/api/v1/processes/{job.pk}/run/", {"max_batch": 5})
    assert response.status_code == 201, response.content
    body = response.json()
    run = InstanceExec.objects.get(process=job)
    assert body["run"] == run.pk
    assert body["url"] == f"http://testserver/api/v1/runs/{run.pk}/" == response["Location"]
    assert body["page"] == f"http://testserver/runs/{run.pk}/"
    assert body["target_batch_id"] == run.target_batch_id
    # The run started in the request; its first step is on the workers' queue.
    (step,) = job.steps.all()
    assert sent == [((run.pk, step.pk), {"queue": "celery"})]
    assert api_as(team.viewer).get(body["url"]).json()["id"] == run.pk


def test_running_a_job_that_is_running_is_a_409_saying_so(team, make_job, sent):
    job = make_job("nightly")
    lifecycle.init_job(job.pk, 1)
    response = api_as(team.developer).post(f"/api/v1/processes/{job.pk}/run/")
    assert response.status_code == 409, response.content
    assert response.json()["code"] == 104
    assert sent == []


# Run now and the lifecycle's own init-job: both start a run through init_job, which checks
# the pause under the job's lock (tests/processes/test_concurrency.py races it).
@pytest.mark.parametrize(
    ("action", "run_field"), [("run", "run"), ("init-job", "instance_exec_id")]
)
def test_starting_a_paused_job_is_a_409_unless_forced(team, make_job, sent, action, run_field):
    job = make_job("nightly")
    schedules.set_schedule(job.pk, schedules.Schedule(every_seconds=3600))
    schedules.pause(job.pk)
    dev = api_as(team.developer)
    refused = dev.post(f"/api/v1/processes/{job.pk}/{action}/", {"max_batch": 5}, format="json")
    assert refused.status_code == 409, refused.content
    assert refused.json()["code"] == 116
    assert "force" in refused.json()["message"]
    assert not InstanceExec.objects.filter(process=job).exists()
    forced = dev.post(f"/api/v1/processes/{job.pk}/{action}/", {"force": True}, format="json")
    assert forced.status_code == 201, forced.content
    assert InstanceExec.objects.get(process=job).pk == forced.json()[run_field]
    assert schedules.is_paused(job.pk)  # running it anyway does not resume its schedule


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_run_now_needs_a_developer_of_the_team(team, make_job, sent, who, status):
    job = make_job("nightly")
    response = api_as(getattr(team, who)).post(f"/api/v1/processes/{job.pk}/run/")
    assert response.status_code == status
    assert sent == []


def test_a_step_cannot_be_run_on_its_own(team, make_job, sent):
    step = make_job("nightly").steps.get()
    response = api_as(team.developer).post(f"/api/v1/processes/{step.pk}/run/")
    assert response.status_code == 404
    assert response.json()["code"] == 102


def test_terminate_fails_the_running_run(team, make_job):
    job = make_job("busy")
    claim = lifecycle.init_job(job.pk, 1)
    response = api_as(team.developer).post(
        f"/api/v1/processes/{job.pk}/terminate/", {"error": "wrong input"}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"terminated_run": claim.instance_exec_id}
    run = InstanceExec.objects.get(pk=claim.instance_exec_id)
    assert (run.exec_state_id, run.error) == (ExecState.FAILED, "wrong input")


def test_terminating_a_job_that_is_not_running_is_a_conflict(team, make_job):
    job = make_job("idle")
    response = api_as(team.developer).post(f"/api/v1/processes/{job.pk}/terminate/")
    assert response.status_code == 409
    assert response.json()["code"] == 105


def test_schedule_is_set_paused_resumed_and_shown(team, make_job):
    job = make_job("hourly")
    dev = api_as(team.developer)
    url = f"/api/v1/processes/{job.pk}/schedule/"
    body = {"cron": "0 * * * *", "timezone": "Europe/Paris"}
    response = dev.put(url, body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["cron"] == "0 * * * *" and response.json()["next_run"]
    assert dev.post(f"/api/v1/processes/{job.pk}/pause/").json()["enabled"] is False
    assert dev.post(f"/api/v1/processes/{job.pk}/resume/").json()["enabled"] is True
    shown = api_as(team.viewer).get(url)
    assert shown.status_code == 200 and shown.json()["timezone"] == "Europe/Paris"
    assert schedules.schedule_of(job.pk).enabled


def test_an_invalid_schedule_is_a_400_naming_the_field(team, make_job):
    job = make_job("broken")
    response = api_as(team.developer).put(
        f"/api/v1/processes/{job.pk}/schedule/", {"cron": "every day"}, format="json"
    )
    assert response.status_code == 400
    assert "cron" in response.json()


def test_a_viewer_cannot_change_a_schedule_and_an_outsider_cannot_see_it(team, make_job):
    job = make_job("guarded")
    url = f"/api/v1/processes/{job.pk}/schedule/"
    assert api_as(team.viewer).put(url, {"every_seconds": 60}, format="json").status_code == 403
    assert api_as(team.outsider).get(url).status_code == 404
    assert api_as(team.viewer).post(f"/api/v1/processes/{job.pk}/pause/").status_code == 403
