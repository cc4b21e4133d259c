"""Retry in one click: a failed run's page retries it (its dead letters put back, a run of its
job started, that run's page opened), and a failure a later run fixed is shown as resolved,
with a link, and no longer counted on the dashboard."""

from __future__ import annotations

import pytest

from batches.models import BatchConsumpQueue, BatchState
from bdre.errors import BdreError, Code
from processes import orchestrator, schedules
from processes.models import ExecState, InstanceExec, Trigger
from tests.helpers.api import api_as
from tests.helpers.jobs import fragile_pipeline
from tests.helpers.pages import client_as
from tests.helpers.runs import job_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def dead(team, tmp_path):
    """A consumer whose step failed on its producer's batch until the row was a dead letter:
    its failed runs, and the flag that fixes it."""
    flag = tmp_path / "flag"
    producer, consumer = fragile_pipeline(team, flag, max_retries=2)
    assert orchestrator.run_job(producer.pk).succeeded
    first, last = (orchestrator.run_job(consumer.pk) for _ in range(2))
    assert not first.succeeded and not last.succeeded
    assert last.target_batch_id == first.target_batch_id  # the retry kept the batch
    (row,) = BatchConsumpQueue.objects.filter(process__parent=consumer)
    assert row.batch_state_id == BatchState.DISCARDED  # out of retries: a dead letter
    return consumer, InstanceExec.objects.get(pk=last.instance_exec_id), flag


def test_a_failed_run_is_retried_from_its_page_and_then_shown_resolved(
    team, dead, sent, django_capture_on_commit_callbacks
):
    job, failed, flag = dead
    client = client_as(team.developer)
    page = client.get(f"/runs/{failed.pk}/").content.decode()
    assert f'action="/runs/{failed.pk}/retry/"' in page
    assert f"puts batch {failed.target_batch_id} back and starts a run of consumer now" in page
    dashboard = client.get("/dashboard/live/").content.decode()
    assert '<span>2</span><a href="/runs/?unresolved=true"' in dashboard
    assert f'href="/runs/{failed.pk}/"' in client.get("/runs/?unresolved=true").content.decode()

    flag.touch()  # the fix
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"/runs/{failed.pk}/retry/", follow=True)
    retry = InstanceExec.objects.filter(process=job, parent__isnull=True).latest("id")
    assert answer.redirect_chain == [(f"/runs/{retry.pk}/", 302)]  # its page opens
    assert (retry.trigger, retry.target_batch_id) == (Trigger.RETRY, failed.target_batch_id)
    said = answer.content.decode()
    assert (
        f"Run {retry.pk}, retrying run {failed.pk}, of consumer started: its first steps are "
        "queued now for the workers of the celery queue."
    ) in said
    assert [args for args, _ in sent] == [(retry.pk, job.steps.get().pk)]

    # The worker's part, here: the step the retry sent, then the run's end.
    orchestrator.execute_step(retry.pk, job.steps.get().pk)
    orchestrator.advance(retry.pk)
    retry.refresh_from_db()
    assert retry.exec_state_id == ExecState.SUCCESS, retry.error
    page = client.get(f"/runs/{failed.pk}/").content.decode()
    assert f'Resolved: <a href="/runs/{retry.pk}/">run {retry.pk}</a> delivered batch' in page
    assert "retry/" not in page
    listed = client.get("/runs/", {"job": job.pk}).content.decode()
    assert listed.count(f'href="/runs/{retry.pk}/" title="a later run delivered its batch"') == 2
    dashboard = client.get("/dashboard/live/").content.decode()
    assert '<span>0</span><a href="/runs/?unresolved=true"' in dashboard  # both failures resolved
    assert f'href="/runs/{failed.pk}/"' not in client.get("/runs/?unresolved=true").content.decode()
    again = client.post(f"/runs/{failed.pk}/retry/", follow=True).content.decode()
    assert f"run {failed.pk} is resolved: run {retry.pk} delivered its batch" in again


def test_a_run_that_did_not_fail_has_nothing_to_retry(team, dead):
    job = dead[0]
    producer_run = InstanceExec.objects.filter(parent__isnull=True).exclude(process=job).get()
    client = client_as(team.developer)
    assert "retry/" not in client.get(f"/runs/{producer_run.pk}/").content.decode()
    said = client.post(f"/runs/{producer_run.pk}/retry/", follow=True).content.decode()
    assert f"run {producer_run.pk} did not fail: nothing to retry (error 118)" in said


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_only_the_teams_developers_retry(team, dead, sent, who, status):
    failed = dead[1]
    client = client_as(getattr(team, who))
    if who == "viewer":
        assert "retry/" not in client.get(f"/runs/{failed.pk}/").content.decode()
    assert client.post(f"/runs/{failed.pk}/retry/").status_code == status
    assert sent == []
    assert BatchConsumpQueue.objects.get().batch_state_id == BatchState.DISCARDED


def test_a_dead_letter_is_retried_from_the_queue_page(
    team, dead, sent, django_capture_on_commit_callbacks
):
    job, failed, flag = dead
    row = BatchConsumpQueue.objects.get()
    client = client_as(team.developer)
    assert f'href="/queue/{row.pk}/retry/"' in client.get("/queue/").content.decode()
    confirm = client.get(f"/queue/{row.pk}/retry/").content.decode()
    assert "start a run of the job now" in confirm and "Yes, retry" in confirm

    flag.touch()
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"/queue/{row.pk}/retry/", follow=True)
    retry = InstanceExec.objects.filter(process=job, parent__isnull=True).latest("id")
    assert answer.redirect_chain == [(f"/runs/{retry.pk}/", 302)]
    assert f"run {retry.pk} of consumer started to take it" in answer.content.decode()
    assert (retry.trigger, retry.target_batch_id) == (Trigger.RETRY, failed.target_batch_id)
    assert [args for args, _ in sent] == [(retry.pk, job.steps.get().pk)]


def test_the_api_retries_a_failed_run_and_says_which_run_resolved_it(
    team, dead, sent, django_capture_on_commit_callbacks
):
    job, failed, flag = dead
    client = api_as(team.developer)
    assert client.get(f"/api/v1/runs/{failed.pk}/").json()["resolved_by"] is None
    flag.touch()
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"/api/v1/runs/{failed.pk}/retry/")
    assert answer.status_code == 201, answer.content
    retry = answer.json()["run"]
    assert answer.json()["target_batch_id"] == failed.target_batch_id
    assert answer.json()["page"].endswith(f"/runs/{retry}/")
    orchestrator.execute_step(retry, job.steps.get().pk)
    orchestrator.advance(retry)
    assert client.get(f"/api/v1/runs/{failed.pk}/").json()["resolved_by"] == retry
    listed = client.get("/api/v1/runs/", {"process": job.pk}).json()["results"]
    assert {r["id"]: r["resolved_by"] for r in listed} == {
        retry: None,
        failed.pk: retry,
        failed.pk - 2: retry,  # the first failed run of the batch (the producer's run between)
    }
    again = client.post(f"/api/v1/runs/{failed.pk}/retry/")
    assert again.status_code == 409 and again.json()["code"] == 118
    assert api_as(team.viewer).post(f"/api/v1/runs/{failed.pk}/retry/").status_code == 403
    assert api_as(team.outsider).post(f"/api/v1/runs/{failed.pk}/retry/").status_code == 404


def queue_state() -> list[tuple[int, str]]:
    return list(BatchConsumpQueue.objects.values_list("batch_state_id", "discard_reason"))


def test_a_retry_that_cannot_start_puts_nothing_back(team, dead, sent):
    job, failed, _ = dead
    client = api_as(team.developer)
    before = queue_state()
    schedules.set_schedule(job.pk, schedules.Schedule(every_seconds=3600))
    schedules.pause(job.pk)
    paused = client.post(f"/api/v1/runs/{failed.pk}/retry/")
    assert paused.status_code == 409 and paused.json()["code"] == 116
    schedules.resume(job.pk)
    job_run(job, state=ExecState.RUNNING)  # a run going
    running = client.post(f"/api/v1/runs/{failed.pk}/retry/")
    assert running.status_code == 409 and running.json()["code"] == 104
    assert "consumer is running: its next run takes the failed batch" in running.json()["message"]
    assert queue_state() == before and sent == []


def test_a_row_discarded_by_hand_is_not_brought_back_by_a_retry(team, dead, sent):
    failed = dead[1]
    row = BatchConsumpQueue.objects.get()
    BatchConsumpQueue.objects.filter(pk=row.pk).update(discard_reason="discarded by ops: bad")
    answer = api_as(team.developer).post(f"/api/v1/runs/{failed.pk}/retry/")
    # Nothing of the batch is waiting: the run the retry starts has nothing to take.
    assert answer.status_code == 409 and answer.json()["code"] in (109, 112), answer.content
    assert queue_state() == [(BatchState.DISCARDED, "discarded by ops: bad")]


def test_the_queue_pages_bulk_form_takes_no_retry(team, dead, sent):
    row = BatchConsumpQueue.objects.get()
    answer = client_as(team.developer).post(
        "/queue/bulk/", {"action": "retry", "ids": [row.pk], "confirm": "yes"}
    )
    assert answer.status_code == 302 and answer["Location"] == "/queue/"
    assert queue_state() == [(BatchState.DISCARDED, "")] and sent == []


def test_a_batch_delivered_before_the_failed_run_is_reprocessed_not_retried(team, dead, sent):
    job, failed, _ = dead
    earlier = InstanceExec.objects.filter(process=job, parent__isnull=True).earliest("id")
    InstanceExec.objects.filter(pk=earlier.pk).update(exec_state_id=ExecState.SUCCESS)
    with pytest.raises(BdreError) as refused:
        orchestrator.put_back_failed(failed.pk)
    assert refused.value.code == Code.QUEUE_STATE_CONFLICT
    assert f"was delivered by run {earlier.pk} before run {failed.pk} rebuilt it" in str(
        refused.value
    )
    assert queue_state() == [(BatchState.DISCARDED, "")]


def test_a_run_that_failed_before_it_had_a_batch_is_retried_as_a_new_run(team, make_job):
    job = make_job("nothing_yet")
    failed = job_run(job, state=ExecState.FAILED)
    InstanceExec.objects.filter(pk=failed.pk).update(target_batch=None)
    assert orchestrator.put_back_failed(failed.pk) == job.pk  # nothing to put back
    with pytest.raises(BdreError) as unknown:
        orchestrator.put_back_failed(failed.pk + 1000)
    assert unknown.value.code == Code.UNKNOWN_ROW
