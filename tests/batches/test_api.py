"""Batches, the queue, the archive and files through REST: the filters an operator uses, file
registration, and requeue and discard, with the roles of the team."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState, File
from processes.models import InstanceExec
from tests.helpers.api import api_as, error, post, register
from tests.helpers.factories import (
    BatchFactory,
    FileFactory,
    JobFactory,
    QueueRowFactory,
    StepFactory,
    grant_root,
)

# backends: the lists' filters and ordering: queries (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


@pytest.fixture
def dev(team):
    return api_as(team.developer)


def step_in(team):
    return StepFactory(parent=JobFactory(bus_domain=team.application))


def test_queue_filters_by_process_state_marking_and_insert_time(team, dev):
    step, other = step_in(team), step_in(team)
    now = timezone.now()
    old = QueueRowFactory(process=step, insert_ts=now - timedelta(days=3), batch_marking="EOD")
    new = QueueRowFactory(process=step, insert_ts=now, batch_marking="2026-11-20")
    dead = QueueRowFactory(process=other, batch_state_id=BatchState.DISCARDED)

    def ids(**params):
        return [r["id"] for r in dev.get("/api/v1/queue/", params).json()["results"]]

    assert sorted(ids(process=step.pk)) == [old.pk, new.pk]
    assert ids(batch_state=BatchState.DISCARDED) == [dead.pk]
    assert ids(marking="eod") == [old.pk]
    assert ids(inserted_before=(now - timedelta(days=1)).isoformat()) == [old.pk]
    assert ids(inserted_after=(now - timedelta(days=1)).isoformat(), process=step.pk) == [new.pk]
    assert ids(job=step.parent_id, ordering="-insert_ts") == [new.pk, old.pk]
    assert ids(application=team.application.pk, ordering="id") == [old.pk, new.pk, dead.pk]


def test_a_bad_filter_value_is_a_400_not_a_500(team, dev):
    response = dev.get("/api/v1/queue/", {"inserted_after": "yesterday", "process": "x"})
    assert response.status_code == 400
    assert "inserted_after" in response.json() or "process" in response.json()


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/queue/?job=99999999999999999999", "job"),
        ("/api/v1/batches/?source_process=99999999999999999999", "source_process"),
        ("/api/v1/files/?application=-1", "application"),
        ("/api/v1/runs/?job=1.5", "job"),
        ("/api/v1/lineage/relations/?node=99999999999999999999", "node"),
    ],
)
def test_an_id_filter_out_of_range_is_a_400_naming_the_field(dev, url, field):
    response = dev.get(url)
    assert response.status_code == 400
    assert field in response.json()


def test_the_archive_lists_rows_with_their_queue_id(team, dev):
    row = QueueRowFactory(process=step_in(team))
    archived = ArchiveConsumpQueue.objects.create(
        queue_id=row.pk,
        source_batch=row.source_batch,
        insert_ts=row.insert_ts,
        process=row.process,
        batch_state_id=BatchState.PROCESSED,
        batch_marking="EOD",
    )
    body = dev.get("/api/v1/archive/", {"queue_id": row.pk}).json()
    assert [(r["id"], r["batch_state_name"]) for r in body["results"]] == [
        (archived.pk, "PROCESSED")
    ]
    assert dev.get("/api/v1/archive/", {"marking": "nothing"}).json()["count"] == 0


def test_batches_show_their_file_count_and_filter_by_creation(team, dev):
    batch = BatchFactory(bus_domain=team.application)
    FileFactory.create_batch(3, batch=batch)
    empty = BatchFactory(bus_domain=team.application)
    body = dev.get("/api/v1/batches/", {"application": team.application.pk}).json()
    assert [(b["id"], b["files"]) for b in body["results"]] == [(empty.pk, 0), (batch.pk, 3)]
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert dev.get("/api/v1/batches/", {"created_after": later}).json()["count"] == 0


def test_files_filter_by_batch_and_path(team, dev):
    batch = BatchFactory(bus_domain=team.application)
    wanted = FileFactory(batch=batch, path="/landing/2026/orders.tsv")
    FileFactory(batch=batch, path="/landing/2026/clicks.tsv")
    body = dev.get("/api/v1/files/", {"batch": batch.pk, "path_contains": "orders"}).json()
    assert [f["id"] for f in body["results"]] == [wanted.pk]


def test_pages_carry_a_total_count_and_links(team, dev):
    step = step_in(team)
    QueueRowFactory.create_batch(60, process=step)
    first = dev.get("/api/v1/queue/", {"process": step.pk}).json()
    assert (first["count"], len(first["results"])) == (60, 50)
    second = dev.get(first["next"]).json()
    assert len(second["results"]) == 10


def test_requeue_and_discard_through_rest(dev, make_job):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest], max_retries=1)
    register(dev, ingest, "1.tsv")
    post(dev, f"processes/{load.pk}/init-job/", {"max_batch": 1})
    post(dev, f"processes/{load.pk}/term-job/", {"error": "broken"})
    row = BatchConsumpQueue.objects.get(process__parent=load)
    assert row.batch_state_id == BatchState.DISCARDED

    listed = dev.get("/api/v1/queue/", {"batch_state": BatchState.DISCARDED}).json()
    assert [r["id"] for r in listed["results"]] == [row.pk]
    response = post(dev, f"queue/{row.pk}/requeue/")
    assert response.status_code == 200
    # Back on the batch its run failed to build, for the next run to rebuild it.
    assert response.json()["batch_state_name"] == "FAILED"
    assert response.json()["target_batch"] == row.target_batch_id
    discarded = post(dev, f"queue/{row.pk}/discard/", {"reason": "bad file"})
    assert discarded.json()["last_error"] == "broken"
    assert discarded.json()["discard_reason"] == "discarded by developer: bad file"
    assert post(dev, f"queue/{row.pk}/discard/", {}).status_code == 400
    assert post(dev, f"queue/{row.pk}/requeue/").status_code == 200
    rerun = post(dev, f"processes/{load.pk}/init-job/", {"max_batch": 1}).json()
    assert rerun["is_rerun"] and rerun["target_batch_id"] == row.target_batch_id
    assert error(post(dev, f"queue/{row.pk}/requeue/")) == (409, 110)  # claimed
    register(dev, ingest, "2.tsv")
    waiting = BatchConsumpQueue.objects.get(process__parent=load, batch_state_id=BatchState.NEW)
    assert error(post(dev, f"queue/{waiting.pk}/requeue/")) == (409, 118)  # nothing to requeue
    assert error(post(dev, "queue/999999/requeue/")) == (404, 117)


@pytest.mark.parametrize("role,expected", [("viewer", 403), ("developer", 201), ("outsider", 404)])
def test_roles_on_register_file(team, make_job, role, expected):
    job = make_job("ingest")
    assert register(api_as(getattr(team, role)), job, "f.tsv").status_code == expected
    assert Batch.objects.filter(batch_type="file").exists() is (expected == 201)


def test_two_teams_granted_one_root_each_register_its_files_and_learn_nothing_of_the_other(
    team, make_job
):
    mine = make_job("ingest")
    make_job("load", upstream=[mine])
    # A root the installation's superuser granted to both teams.
    shared = grant_root(team.group, "/shared/")
    shared.granted_teams.add(team.other_group)
    register(api_as(team.developer), mine, "x", path="/shared/a.tsv")
    theirs = JobFactory(bus_domain=team.other_application)
    StepFactory(parent=theirs)
    response = register(api_as(team.outsider), theirs, "x", path="/shared/a.tsv")
    assert response.status_code == 201, response.content  # its own registration, not ours
    again = register(api_as(team.outsider), theirs, "x", path="/shared/a.tsv")
    assert again.status_code == 200 and again.json()["batch_id"] == response.json()["batch_id"]
    batch = Batch.objects.get(pk=response.json()["batch_id"])
    assert batch.bus_domain == team.other_application
    assert File.objects.filter(path="/shared/a.tsv").count() == 2


@pytest.mark.parametrize("role,expected", [("viewer", 403), ("developer", 200), ("outsider", 404)])
def test_roles_on_requeue(team, make_job, role, expected):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest])
    register(api_as(team.developer), ingest, "1.tsv")
    row = BatchConsumpQueue.objects.get(process__parent=load)
    BatchConsumpQueue.objects.filter(pk=row.pk).update(batch_state_id=BatchState.DISCARDED)
    assert post(api_as(getattr(team, role)), f"queue/{row.pk}/requeue/").status_code == expected


def _dead_letter(dev, make_job, *files):
    """A job whose runs failed until its input went to the dead letter: two attempts."""
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest], max_retries=2)
    for name in files or ("1.tsv",):
        register(dev, ingest, name)
    for error_text in ("disk full", "schema mismatch in column 3"):
        post(dev, f"processes/{load.pk}/init-job/", {"max_batch": 10})
        post(dev, f"processes/{load.pk}/term-job/", {"error": error_text})
    return ingest, load


def test_discarding_a_dead_letter_keeps_its_last_error_and_records_who_and_why(dev, make_job):
    _, load = _dead_letter(dev, make_job)
    row = BatchConsumpQueue.objects.get(process__parent=load)
    post(dev, f"queue/{row.pk}/requeue/")
    discarded = post(dev, f"queue/{row.pk}/discard/", {"reason": "the file is corrupt"}).json()
    assert discarded["batch_state_name"] == "DISCARDED"
    assert discarded["last_error"] == "schema mismatch in column 3"
    assert discarded["discard_reason"] == "discarded by developer: the file is corrupt"


def test_a_queue_row_shows_every_run_that_attempted_it(dev, make_job):
    _, load = _dead_letter(dev, make_job)
    row = BatchConsumpQueue.objects.get(process__parent=load)
    detail = dev.get(f"/api/v1/queue/{row.pk}/").json()
    runs = list(
        InstanceExec.objects.filter(process=load).order_by("id").values_list("id", flat=True)
    )
    assert [a["run"] for a in detail["attempt_history"]] == runs
    assert [a["state"] for a in detail["attempt_history"]] == ["FAILED", "FAILED"]
    assert [a["error"] for a in detail["attempt_history"]] == [
        "disk full",
        "schema mismatch in column 3",
    ]
    assert all(a["start_ts"] for a in detail["attempt_history"])


def test_bulk_requeue_and_discard_answer_each_row_and_hide_other_teams_rows(team, dev, make_job):
    ingest, load = _dead_letter(dev, make_job, "1.tsv", "2.tsv")
    dead = list(
        BatchConsumpQueue.objects.filter(process__parent=load)
        .order_by("id")
        .values_list("id", flat=True)
    )
    theirs = QueueRowFactory(
        process=StepFactory(parent=JobFactory(bus_domain=team.other_application)),
        batch_state_id=BatchState.DISCARDED,
        last_error="their secret",
    )
    answer = post(dev, "queue/requeue/", {"ids": [*dead, theirs.pk, 10**9]})
    assert answer.status_code == 200, answer.content
    results = {r["id"]: r for r in answer.json()["results"]}
    assert [results[pk]["ok"] for pk in dead] == [True, True]
    assert results[dead[0]]["row"]["batch_state_name"] == "FAILED"
    # Another team's row answers exactly as an id of no row: nothing about it is revealed.
    unknown = {k: v for k, v in results[10**9].items() if k != "id"}
    assert {k: v for k, v in results[theirs.pk].items() if k != "id"} == unknown
    assert unknown["ok"] is False and unknown["error"]["code"] == 117
    theirs.refresh_from_db()
    assert theirs.batch_state_id == BatchState.DISCARDED

    answer = post(dev, "queue/discard/", {"ids": dead, "reason": "bad day"}).json()
    assert [r["ok"] for r in answer["results"]] == [True, True]
    rows = BatchConsumpQueue.objects.filter(pk__in=dead)
    assert {r.batch_state_id for r in rows} == {BatchState.DISCARDED}
    assert {r.last_error for r in rows} == {"schema mismatch in column 3"}
    # Each row is done or refused alone: a row whose state forbids it does not stop the rest.
    register(dev, ingest, "3.tsv")
    waiting = BatchConsumpQueue.objects.get(process__parent=load, batch_state_id=BatchState.NEW)
    answer = post(dev, "queue/requeue/", {"ids": [*dead, waiting.pk]}).json()
    assert [r["ok"] for r in answer["results"]] == [True, True, False]
    assert answer["results"][2]["error"]["code"] == 118
    assert "only failed or discarded rows" in answer["results"][2]["error"]["message"]


def test_bulk_actions_need_the_developer_role_and_a_known_row(team, make_job):
    _, load = _dead_letter(api_as(team.developer), make_job)
    row = BatchConsumpQueue.objects.get(process__parent=load)
    refused = post(api_as(team.viewer), "queue/requeue/", {"ids": [row.pk]})
    assert refused.status_code == 403
    # What to ask for, not DRF's "You do not have permission to perform this action."
    assert "developer role" in refused.json()["detail"]
    outsider = post(api_as(team.outsider), "queue/discard/", {"ids": [row.pk], "reason": "x"})
    assert outsider.status_code == 404
    assert post(api_as(team.developer), "queue/requeue/", {"ids": []}).status_code == 400
    row.refresh_from_db()
    assert row.batch_state_id == BatchState.DISCARDED
