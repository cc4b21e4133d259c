"""A table's rows in view (batches/preview.py): a user asks on the table's page or through the
API, a Spark worker reads the first rows of the partition through the steps' own session and
reader, and the page and the API show them, to the users who may see the partition; what
cannot be read is explained, never a server error, and a read is stopped after its time.
The partitions are written as a step leaves them (an attempt's folder of Parquet files, its
record), published through the lifecycle."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from batches import partitions, preview, tables
from batches.models import Partition, PartitionPreview
from processes import lifecycle
from tests.helpers.api import api_as
from tests.helpers.factories import (
    HiveTableFactory,
    InstanceExecFactory,
    PartitionPreviewFactory,
)
from tests.helpers.lifecycle import steps_of
from tests.helpers.parquet import write_parquet

pytestmark = pytest.mark.django_db

State = PartitionPreview.State

EVENTS = [
    {
        "event_id": f"e{n}",
        "collector_tstamp": datetime(2026, 11, 1, 9, n),
        "page_url": None if n == 1 else f"https://shop.example/p/{n}",
        "contexts": [{"schema": "iglu:com.acme/product/1-0-0", "data": {"sku": f"S{n}"}}],
    }
    for n in range(30)
]


@pytest.fixture
def table(team, tmp_path):
    return HiveTableFactory(
        bus_domain=team.application,
        dbname="lake",
        table_name="atomic_events",
        location=str(tmp_path / "atomic_events"),
        ddl="struct<event_id:string,collector_tstamp:timestamp>",
    )


def publish(job, table, rows: list[dict], files: int = 1) -> Partition:
    """A run of ``job`` whose step writes ``rows`` into ``table`` in ``files`` files."""
    (step,) = steps_of(job)
    batch = lifecycle.init_job(job.pk).target_batch_id
    written = write(table, batch, lifecycle.init_step(step.pk), rows, files)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)
    written.refresh_from_db()
    return written


def write(table, batch: int, step_run: int, rows: list[dict], files: int = 1) -> Partition:
    location = partitions.attempt_location(table, batch, step_run)
    size = -(-len(rows) // files) if rows else 0
    for n in range(files):
        write_parquet(Path(location) / f"part-{n:05}.parquet", rows[n * size : (n + 1) * size])
    (Path(location) / "_SUCCESS").write_bytes(b"")
    return partitions.record_written(
        table, batch_id=batch, step_run_id=step_run, location=location, rows=len(rows), size=1
    )


def read_as_a_worker_would(shown: PartitionPreview, columns, values, more=False) -> None:
    """What batches.preview.read records once Spark has read the rows (the Spark tests
    below read them for real)."""
    PartitionPreview.objects.filter(pk=shown.pk).update(
        state=State.DONE, columns=columns, values=values, more=more, finished_at=timezone.now()
    )


# --- asking, waiting, showing: the page and the API ---------------------------------------


def test_the_table_page_asks_a_spark_worker_and_shows_what_it_read(
    make_job, table, team, client, django_capture_on_commit_callbacks
):
    job = make_job("shred", steps=1)
    publish(job, table, EVENTS[:2])
    newest = publish(job, table, EVENTS, files=3)
    client.force_login(team.viewer)
    url = f"/tables/{table.pk}/"

    page = client.get(url).content.decode()
    assert "Show the first 20 rows</button> of" in page
    assert f"batch {newest.batch_id}</a>'s partition, 30 rows: a Spark worker" in page
    assert "data-refresh" not in page, "nothing is read before a user asks"

    with django_capture_on_commit_callbacks() as queued:
        asked = client.post(f"{url}preview/", {"partition": newest.pk})
    assert asked.status_code == 302
    assert asked["Location"] == f"{url}?preview={newest.pk}#rows"
    assert len(queued) == 1, "one read queued"
    shown = PartitionPreview.objects.get()
    assert (shown.partition, shown.rows, shown.asked_by, shown.state) == (
        newest,
        20,
        team.viewer,
        State.QUEUED,
    )
    waiting = client.get(url, {"preview": newest.pk}).content.decode()
    assert "Waiting for a Spark worker on the queue <code>spark</code>" in waiting
    live = f"/tables/{table.pk}/preview/{newest.pk}/live/"
    assert f'data-refresh="{live}"' in waiting and "live.js" in waiting

    read_as_a_worker_would(
        shown,
        [["event_id", "string"], ["page_url", "string"], ["batch_id", "int"]],
        [["e0", "https://shop.example/p/0", str(newest.batch_id)], ["e1", "NULL", "3"]],
        more=True,
    )
    fragment = client.get(live).content.decode()
    assert "<small>refreshing</small>" not in fragment, "the page stops refreshing"
    assert '<th title="string">event_id</th>' in fragment
    assert "<td>e1</td><td>NULL</td>" in fragment
    assert f"batch {newest.batch_id}</a>'s partition, of 30, as a Spark worker read them" in (
        fragment
    )
    # Read once, shown to everyone who looks next, without asking Spark again.
    client.force_login(team.developer)
    assert "<td>e1</td><td>NULL</td>" in client.get(url).content.decode()


def test_asking_again_queues_a_read_only_when_the_last_failed_or_was_given_up(
    make_job, table, team, settings
):
    partition = publish(make_job("shred", steps=1), table, EVENTS[:3])
    first, new = preview.request(partition, 20, team.viewer)
    assert new
    assert preview.request(partition, 20, team.admin) == (first, False), "one read at a time"
    assert preview.request(partition, 5)[1], "another number of rows is another read"

    read_as_a_worker_would(first, [["event_id", "string"]], [["e0"]])
    assert preview.request(partition, 20) == (PartitionPreview.objects.get(pk=first.pk), False)

    PartitionPreview.objects.filter(pk=first.pk).update(state=State.FAILED, message="broken")
    again, new = preview.request(partition, 20)
    assert new and again.pk != first.pk
    assert not PartitionPreview.objects.filter(pk=first.pk).exists(), "the failure replaced"

    # No worker took it from the Spark queue: after the wait it is given up, asked again.
    settings.BDRE_PREVIEW_WAIT_SECONDS, settings.BDRE_PREVIEW_SECONDS = 600, 60
    later = again.asked_at + timedelta(seconds=601)
    assert not preview.given_up(again, later - timedelta(seconds=2))
    assert preview.given_up(again, later)
    assert preview.given_up_message(again) == (
        "no Spark worker took it within 10 minutes: is a worker consuming the queue 'spark', "
        "or are they all busy with long steps? Ask again"
    )
    third, new = preview.request(partition, 20, now=later)
    assert new and third.pk != again.pk
    # The worker that takes the given-up one at last leaves it alone.
    assert preview.read(again.pk, spark=lambda: pytest.fail("no Spark for it")) is None

    # A worker took the third and died reading it: lost after its time and a margin for
    # the worker's session to start, not after the queue's wait.
    started = third.asked_at + timedelta(seconds=500)
    PartitionPreview.objects.filter(pk=third.pk).update(state=State.RUNNING, started_at=started)
    third.refresh_from_db()
    assert not preview.given_up(third, started + timedelta(seconds=179))
    assert preview.given_up(third, started + timedelta(seconds=181))
    assert preview.given_up_message(third) == (
        "the Spark worker reading it stopped answering (it may have died): ask again"
    )
    fourth, new = preview.request(partition, 20, now=started + timedelta(seconds=181))
    assert new and PartitionPreview.objects.get(pk=fourth.pk).state == State.QUEUED
    assert not PartitionPreview.objects.filter(pk=third.pk).exists()


def test_two_asks_at_once_make_one_read_even_without_a_row_lock(make_job, table, team, monkeypatch):
    """SQLite's SELECT ... FOR UPDATE locks nothing: both asks find no preview, and the
    database's constraint lets one of them make it."""
    partition = publish(make_job("shred", steps=1), table, EVENTS[:3])
    first, _ = preview.request(partition, 20)
    real = preview.latest
    calls = []

    def blind_once(*args):
        calls.append(args)
        return None if len(calls) == 1 else real(*args)

    monkeypatch.setattr(preview, "latest", blind_once)
    assert preview.request(partition, 20, team.admin) == (first, False)
    assert PartitionPreview.objects.count() == 1


def test_a_preview_given_up_says_so_on_the_page_and_in_the_api(make_job, table, team, client):
    partition = publish(make_job("shred", steps=1), table, EVENTS[:3])
    shown, _ = preview.request(partition, 20)
    PartitionPreview.objects.filter(pk=shown.pk).update(
        asked_at=timezone.now() - timedelta(hours=1)
    )
    client.force_login(team.viewer)
    page = client.get(f"/tables/{table.pk}/").content.decode()
    assert "could not be read: no Spark worker took it within 10 minutes" in page
    assert "Ask again</button>" in page and "data-refresh" not in page
    body = api_as(team.viewer).get(f"/api/v1/tables/{table.pk}/preview/").json()
    assert body["state"] == "failed" and body["message"].startswith("no Spark worker took it")


def test_the_api_asks_then_follows_the_read(make_job, table, team):
    job = make_job("shred", steps=1)
    first = publish(job, table, EVENTS[:3])
    newest = publish(job, table, EVENTS[10:12])
    url = f"/api/v1/tables/{table.pk}/preview/"
    viewer = api_as(team.viewer)

    none_yet = viewer.get(url)
    assert none_yet.status_code == 404
    assert "POST to this URL asks a Spark worker" in none_yet.json()["detail"]
    asked = viewer.post(url, {"partition": first.pk, "rows": 2}, format="json")
    assert asked.status_code == 202, asked.content
    assert asked.json() | {"asked_at": None} == {
        "id": asked.json()["id"],
        "state": "queued",
        "partition": asked.json()["partition"],
        "rows_asked": 2,
        "columns": [],
        "rows": [],
        "more": False,
        "message": "",
        "asked_at": None,
        "started_at": None,
        "finished_at": None,
    }
    assert asked.json()["partition"]["batch"] == first.batch_id
    assert viewer.post(url, format="json").json()["partition"]["id"] == newest.pk, "the newest"

    read_as_a_worker_would(PartitionPreview.objects.get(pk=asked.json()["id"]), [["a", "int"]], [])
    body = viewer.get(url, {"partition": first.pk, "rows": 2}).json()
    assert (body["state"], body["columns"]) == ("done", [{"name": "a", "type": "int"}])
    again = viewer.post(url, {"partition": first.pk, "rows": 2}, format="json")
    assert again.status_code == 200 and again.json()["id"] == body["id"]

    too_many = viewer.post(url, {"rows": 201}, format="json")
    assert too_many.status_code == 400 and "200" in str(too_many.json()["rows"])
    assert viewer.get(url, {"partition": 10**9}).status_code == 404


def test_an_owner_previews_any_attempt_and_a_shared_reader_only_published_ones(
    make_job, table, team, client
):
    job = make_job("shred", steps=1)
    old = publish(job, table, EVENTS[:1])
    (step,) = steps_of(job)
    rebuilt = write(table, old.batch_id, InstanceExecFactory(process=step).pk, EVENTS[5:7])
    partitions.publish(old.batch_id)
    PartitionPreviewFactory(partition=old, values=[["e0", "1"]])
    client.force_login(team.viewer)
    page = client.get(f"/tables/{table.pk}/", {"preview": old.pk}).content.decode()
    assert "(replaced, not what readers see)" in page and "<td>e0</td>" in page
    for odd in ("x", "²", "9" * 30):
        assert client.get(f"/tables/{table.pk}/", {"preview": odd}).status_code == 404
        assert client.post(f"/tables/{table.pk}/preview/", {"partition": odd}).status_code == 404

    url = f"/api/v1/tables/{table.pk}/preview/"
    outsider = api_as(team.outsider)
    client.force_login(team.outsider)
    assert client.get(f"/tables/{table.pk}/").status_code == 404
    assert client.post(f"/tables/{table.pk}/preview/").status_code == 404
    assert client.get(f"/tables/{table.pk}/preview/{old.pk}/live/").status_code == 404
    assert outsider.get(url, {"partition": old.pk}).status_code == 404
    assert outsider.post(url, format="json").status_code == 404

    tables.share(team.admin, table, team.other_group)
    assert "Show the first 20 rows" in client.get(f"/tables/{table.pk}/").content.decode()
    assert client.get(f"/tables/{table.pk}/", {"preview": old.pk}).status_code == 404
    assert client.get(f"/tables/{table.pk}/preview/{old.pk}/live/").status_code == 404
    assert outsider.get(url, {"partition": old.pk}).status_code == 404
    assert outsider.post(url, {"partition": old.pk}, format="json").status_code == 404
    asked = outsider.post(url, format="json")
    assert asked.status_code == 202 and asked.json()["partition"]["id"] == rebuilt.pk


def test_removed_files_are_explained_and_take_their_preview_with_them(
    make_job, table, team, client, settings
):
    job = make_job("shred", steps=1)
    old = publish(job, table, EVENTS[:2])
    PartitionPreviewFactory(partition=old, values=[["e0", "1"]])
    publish_again = write(table, old.batch_id, InstanceExecFactory().pk, EVENTS[2:3])
    partitions.publish(publish_again.batch_id)
    settings.BDRE_PARTITION_GRACE_SECONDS = 0

    assert partitions.remove_unused(timezone.now() + timedelta(seconds=1)) == [old.pk]
    assert not PartitionPreview.objects.exists(), "sample rows go with the files"
    client.force_login(team.viewer)
    gone = client.get(f"/tables/{table.pk}/", {"preview": old.pk}).content.decode()
    assert f"the files of batch {old.batch_id}&#x27;s partition were removed" in gone
    assert "Show the first" not in gone
    url = f"/api/v1/tables/{table.pk}/preview/"
    for answer in (
        api_as(team.viewer).get(url, {"partition": old.pk}),
        api_as(team.viewer).post(url, {"partition": old.pk}, format="json"),
    ):
        assert (answer.status_code, answer.json()["code"]) == (404, 121)
    Partition.objects.filter(pk=old.pk).update(removed_at=datetime(2026, 11, 2, 8, 30, tzinfo=UTC))
    old.refresh_from_db()
    assert preview.refusal(old).message.endswith("removed 2026-11-02 08:30 UTC (replaced)")


# --- the read itself, by Spark ------------------------------------------------------------


@pytest.mark.spark
def test_a_worker_reads_the_first_rows_with_their_spark_types_through_the_api(
    make_job, table, team, spark, eager, django_capture_on_commit_callbacks
):
    job = make_job("shred", steps=1)
    long = "x" * 400
    newest = publish(job, table, [{**e, "page_url": long} for e in EVENTS], files=3)
    url = f"/api/v1/tables/{table.pk}/preview/"
    viewer = api_as(team.viewer)

    with django_capture_on_commit_callbacks(execute=True):
        assert viewer.post(url, {"rows": 20}, format="json").status_code == 202
    body = viewer.get(url).json()
    assert body["state"] == "done", body
    assert body["columns"] == [
        {"name": "event_id", "type": "string"},
        {"name": "collector_tstamp", "type": "timestamp_ntz"},
        {"name": "page_url", "type": "string"},
        {"name": "contexts", "type": "array<struct<schema:string,data:struct<sku:string>>>"},
        {"name": "batch_id", "type": "int"},
    ]
    assert len(body["rows"]) == 20 and body["more"] is True
    row = body["rows"][0]
    assert row[0] in {e["event_id"] for e in EVENTS}
    n = int(row[0][1:])
    assert row[1] == f"2026-11-01 09:{n:02}:00"
    assert len(row[2]) == 300 and row[2].endswith("…"), "a value is cut at 300 characters"
    assert row[3] == (f'[{{"schema": "iglu:com.acme/product/1-0-0", "data": {{"sku": "S{n}"}}}}]')
    assert row[4] == str(newest.batch_id)
    assert body["started_at"] and body["finished_at"]

    # An empty batch's partition has no data file to read: its columns, no rows.
    empty = publish(job, table, [])
    with django_capture_on_commit_callbacks(execute=True):
        viewer.post(url, {"partition": empty.pk}, format="json")
    body = viewer.get(url, {"partition": empty.pk}).json()
    assert (body["state"], body["rows"], len(body["columns"])) == ("done", [], 3)


@pytest.mark.spark
def test_a_broken_or_vanished_file_fails_the_preview_with_its_reason(make_job, table, team, spark):
    from processes.step_kinds.spark_session import get_spark

    job = make_job("shred", steps=1)
    broken = publish(job, table, EVENTS[:2])
    (Path(broken.location) / "part-00000.parquet").write_bytes(b"not parquet at all")
    shown, _ = preview.request(broken)
    done = preview.read(shown.pk, get_spark)
    assert done.state == State.FAILED
    assert done.message == "part-00000.parquet is not a readable Parquet file"

    vanished = publish(job, table, EVENTS[:2])
    for file in Path(vanished.location).iterdir():
        file.unlink()
    Path(vanished.location).rmdir()
    shown, _ = preview.request(vanished)
    done = preview.read(shown.pk, get_spark)
    assert done.message == "its files are not there any more: removed outside BDRE"
    assert preview.read(shown.pk, get_spark) is None, "a task delivered twice reads nothing"


@pytest.mark.spark
def test_a_read_that_takes_too_long_is_stopped_and_the_session_goes_on(
    make_job, table, team, spark, settings, monkeypatch
):
    """A read stuck in Spark (a store that does not answer), played by tasks that would
    block for ten minutes: its jobs are interrupted at the time, and their tasks, so that
    the session reads on with all its cores."""
    from pyspark.sql import functions as F

    from processes.step_kinds.spark_session import get_spark

    partition = publish(make_job("shred", steps=1), table, EVENTS[:2])
    settings.BDRE_PREVIEW_SECONDS = 2
    real = preview._first_rows

    def stuck(session, partition, limit):
        # A task blocked as on a store that does not answer: interrupted, it ends. Its job
        # stopped at the deadline, the next one started after the deadline is too.
        hang = F.udf(lambda n: time.sleep(600) or n, "long", useArrow=False)
        blocked = session.range(1, numPartitions=1).select(hang("id"))
        with contextlib.suppress(Exception):
            blocked.collect()
        blocked.collect()

    monkeypatch.setattr(preview, "_first_rows", stuck)
    shown, _ = preview.request(partition)
    start = time.monotonic()
    done = preview.read(shown.pk, get_spark)
    assert time.monotonic() - start < 60
    assert done.state == State.FAILED
    assert done.message.startswith("Spark took longer than 2 s to read it and was stopped")

    monkeypatch.setattr(preview, "_first_rows", real)
    # Ten minutes if a blocked task still held a core: both were interrupted.
    settings.BDRE_PREVIEW_SECONDS = 60
    again, _ = preview.request(partition)
    start = time.monotonic()
    reread = preview.read(again.pk, get_spark)
    assert reread.state == State.DONE, reread.message
    assert time.monotonic() - start < 30, "the stopped jobs hold no task slot"
