"""The lifecycle through REST: token and session auth, team roles, errors as
``{"code", "message"}`` with 404/409/400. Registering files, requeue and discard (the batches'
API) are in tests/batches/test_api.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from batches.models import Batch, BatchConsumpQueue
from bdre.models import ApiToken
from processes import lifecycle
from processes.models import ExecState, InstanceExec
from tests.helpers.api import api_as, error, post, register
from tests.helpers.factories import TEST_PASSWORD, InstanceExecFactory
from tests.helpers.lifecycle import landed, steps_of

# backends: the lifecycle's locks and constraints through the API (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


@pytest.fixture
def dev(team):
    return api_as(team.developer)


def test_token_is_issued_for_username_and_password(team):
    response = APIClient().post(
        "/api/v1/auth/token/", {"username": "developer", "password": TEST_PASSWORD}
    )
    assert response.status_code == 200
    assert ApiToken.objects.find(response.json()["token"]).user == team.developer


def test_session_auth_works_too(client, team, make_job):
    job = make_job("p1")
    client.force_login(team.developer)
    response = client.post(f"/api/v1/processes/{job.pk}/init-job/", {}, "application/json")
    assert response.status_code == 201


def test_anonymous_is_refused(make_job):
    job = make_job("p1")
    assert post(APIClient(), f"processes/{job.pk}/init-job/").status_code == 401


def test_full_cycle_through_rest(dev, make_job):
    ingest = make_job("ingest")
    load = make_job("load", steps=2, upstream=[ingest])
    a, b = steps_of(load)
    created = register(dev, ingest, "1.tsv")
    assert created.status_code == 201
    body = created.json()
    assert {row["process"] for row in body["queued"]} == {a.pk, b.pk}
    assert {row["batch_marking"] for row in body["queued"]} == {"2026-11-20"}
    assert register(dev, ingest, "1.tsv").status_code == 200  # already registered

    init = post(dev, f"processes/{load.pk}/init-job/", {"max_batch": 5})
    assert init.status_code == 201, init.json()
    result = init.json()
    step = result["steps"][str(a.pk)]
    assert step["batch_ids"] == [body["batch_id"]]
    assert step["files"][0]["path"] == landed(ingest, "1.tsv")
    assert result["last_recoverable_sp_id"] == a.pk

    sub = post(dev, f"processes/{a.pk}/init-step/")
    assert sub.status_code == 201
    run_id = sub.json()["sub_instance_exec_id"]
    assert (
        post(dev, f"processes/{a.pk}/halt-step/", {"instance_exec_id": run_id}).status_code == 204
    )
    post(dev, f"processes/{b.pk}/init-step/")
    assert post(dev, f"processes/{b.pk}/term-step/", {"error": "oops"}).status_code == 204
    assert post(dev, f"processes/{load.pk}/halt-job/").json()["code"] == 111
    assert post(dev, f"processes/{load.pk}/term-job/", {"error": "oops"}).status_code == 204

    rerun = post(dev, f"processes/{load.pk}/init-job/", {"max_batch": 5}).json()
    assert rerun["is_rerun"] and rerun["target_batch_id"] == result["target_batch_id"]
    post(dev, f"processes/{b.pk}/init-step/")
    post(dev, f"processes/{b.pk}/halt-step/")
    assert post(dev, f"processes/{load.pk}/halt-job/", {"batch_marking": "x"}).status_code == 204
    assert not BatchConsumpQueue.objects.filter(process__parent=load).exists()

    runs = dev.get("/api/v1/runs/", {"process": load.pk}).json()
    assert [r["exec_state_name"] for r in runs["results"]] == ["SUCCESS", "FAILED"]


def test_every_lifecycle_error_through_rest(dev, team, make_job):
    p1 = make_job("p1")
    (s1,) = steps_of(p1)
    uncut = make_job("uncut", upstream=[p1])
    cut = make_job("cut", upstream=[p1], cut="EOD")

    assert error(post(dev, f"processes/{uncut.pk}/init-job/")) == (400, 101)
    assert error(post(dev, "processes/999999/init-job/")) == (404, 102)
    assert error(post(dev, f"processes/{s1.pk}/init-job/")) == (404, 102)
    assert error(post(dev, f"processes/{p1.pk}/init-step/")) == (404, 103)
    assert error(post(dev, f"processes/{s1.pk}/init-step/")) == (409, 108)
    assert error(post(dev, f"processes/{p1.pk}/halt-job/")) == (409, 105)
    assert error(post(dev, f"processes/{cut.pk}/init-job/")) == (409, 109)
    assert error(post(dev, f"processes/{uncut.pk}/init-job/", {"max_batch": 3})) == (409, 112)

    run = post(dev, f"processes/{p1.pk}/init-job/").json()
    assert error(post(dev, f"processes/{p1.pk}/init-job/")) == (409, 104)
    assert error(post(dev, f"processes/{s1.pk}/halt-step/")) == (409, 107)
    post(dev, f"processes/{s1.pk}/init-step/")
    assert error(post(dev, f"processes/{s1.pk}/init-step/")) == (409, 106)
    assert error(post(dev, f"processes/{p1.pk}/halt-job/")) == (409, 110)
    post(dev, f"processes/{s1.pk}/term-step/", {"error": "x"})
    assert error(post(dev, f"processes/{p1.pk}/halt-job/")) == (409, 111)

    lifecycle.reap_expired(timezone.now() + timedelta(hours=2))
    body = {"instance_exec_id": run["instance_exec_id"]}
    assert error(post(dev, f"processes/{p1.pk}/halt-job/", body)) == (409, 115)
    assert error(post(dev, f"runs/{run['instance_exec_id']}/heartbeat/")) == (409, 115)

    other = make_job("other")
    InstanceExecFactory(process=steps_of(other)[0], exec_state_id=ExecState.RUNNING)
    assert error(post(dev, f"processes/{other.pk}/init-job/")) == (409, 110)


def test_files_between_and_its_errors_113_and_114_through_rest(dev, make_job):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest])
    other = make_job("other", upstream=[ingest])
    (step,) = steps_of(load)
    first = register(dev, ingest, "1.tsv").json()["batch_id"]
    second = register(dev, ingest, "2.tsv").json()["batch_id"]
    files = dev.get(
        f"/api/v1/processes/{step.pk}/files/", {"min_batch_id": first, "max_batch_id": second}
    )
    assert files.status_code == 200
    assert [f["path"] for f in files.json()] == [landed(ingest, "1.tsv"), landed(ingest, "2.tsv")]
    missing = dev.get(
        f"/api/v1/processes/{step.pk}/files/", {"min_batch_id": first, "max_batch_id": 999999}
    )
    assert error(missing) == (400, 114)
    own = Batch.objects.create(batch_type="manual")
    from batches import queue

    queue.enqueue(
        source_batch_id=own.pk, source_process_id=ingest.pk, process_id=steps_of(other)[0].pk
    )
    BatchConsumpQueue.objects.filter(source_batch_id=first, process=steps_of(other)[0]).delete()
    mixed = dev.get(
        f"/api/v1/processes/{step.pk}/files/", {"min_batch_id": first, "max_batch_id": own.pk}
    )
    assert error(mixed) == (400, 113)
    assert dev.get(f"/api/v1/processes/{step.pk}/files/").status_code == 400


@pytest.mark.parametrize(
    "role,expected", [("viewer", 403), ("developer", 201), ("admin", 201), ("outsider", 404)]
)
def test_roles_on_init_job(team, make_job, role, expected):
    job = make_job("p1")
    response = post(api_as(getattr(team, role)), f"processes/{job.pk}/init-job/")
    assert response.status_code == expected
    if role == "outsider":
        assert response.json()["code"] == 102  # indistinguishable from an unknown id
    assert InstanceExec.objects.filter(process=job).exists() is (expected == 201)


@pytest.mark.parametrize("role,expected", [("viewer", 403), ("developer", 204), ("outsider", 404)])
def test_roles_on_step_and_job_actions(team, make_job, role, expected):
    job = make_job("p1")
    (step,) = steps_of(job)
    lifecycle.init_job(job.pk)
    lifecycle.init_step(step.pk)
    client = api_as(getattr(team, role))
    assert post(client, f"processes/{step.pk}/halt-step/").status_code == expected
    assert post(client, f"processes/{job.pk}/term-job/").status_code == expected


def test_lists_are_scoped_to_the_users_teams(team, make_job):
    mine = make_job("mine")
    lifecycle.init_job(mine.pk)
    from tests.helpers.factories import JobFactory

    theirs = JobFactory(bus_domain=team.other_application)
    InstanceExecFactory(process=theirs)
    viewer = api_as(team.viewer)
    names = {p["name"] for p in viewer.get("/api/v1/processes/").json()["results"]}
    assert names == {"mine", "mine_s1"}
    runs = viewer.get("/api/v1/runs/").json()["results"]
    assert {r["process"] for r in runs} == {mine.pk}
    assert viewer.get(f"/api/v1/processes/{theirs.pk}/").status_code == 404


def test_invalid_input_is_400_not_500(dev, make_job):
    job = make_job("p1")
    assert post(dev, f"processes/{job.pk}/init-job/", {"max_batch": "lots"}).status_code == 400
    assert post(dev, f"processes/{job.pk}/init-job/", {"max_batch": 0}).status_code == 400
    assert post(dev, "files/register/", {"path": "x"}).status_code == 400
    bad_size = register(dev, job, "neg", file_size=-1)
    assert bad_size.status_code == 400
    assert register(dev, job, "srv", server_id=999999).status_code == 400


def test_a_non_numeric_id_is_404_not_500(dev):
    assert post(dev, "processes/abc/init-job/").status_code == 404
    assert post(dev, "queue/x1/requeue/").status_code == 404
    assert dev.get("/api/v1/runs/none/").status_code == 404


def test_openapi_schema_describes_the_lifecycle(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = schema["paths"]
    for action in ("init-job", "halt-job", "term-job", "init-step", "halt-step", "term-step"):
        assert f"/api/v1/processes/{{id}}/{action}/" in paths
    assert "/api/v1/files/register/" in paths
    assert "/api/v1/queue/{id}/requeue/" in paths
    init = paths["/api/v1/processes/{id}/init-job/"]["post"]["responses"]
    assert {"201", "400", "404", "409"} <= set(init)
