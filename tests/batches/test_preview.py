"""A table's rows in view (batches/preview.py): the table page and the API show the first rows
of a partition, the newest published one unless another is chosen, to the users who may see
it; files that are gone or broken are explained, never a server error. The partitions are
written as a step leaves them (an attempt's folder of Parquet files, its record), published
through the lifecycle."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from batches import partitions, tables
from batches.models import Partition
from processes import lifecycle
from tests.helpers.api import api_as
from tests.helpers.factories import HiveTableFactory, InstanceExecFactory
from tests.helpers.lifecycle import steps_of
from tests.helpers.parquet import write_parquet

pytestmark = pytest.mark.django_db

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


def test_the_table_page_shows_the_first_rows_of_the_newest_published_partition(
    make_job, table, team, client
):
    job = make_job("shred", steps=1)
    publish(job, table, EVENTS[:2])
    newest = publish(job, table, EVENTS, files=3)  # the next batch, in three files
    client.force_login(team.viewer)

    page = client.get(f"/tables/{table.pk}/").content.decode()
    assert (
        f'The first 20 rows of <a href="/batches/{newest.batch_id}/">batch '
        f"{newest.batch_id}</a>'s partition, of 30, as its files hold them." in page
    )
    assert '<th title="string">event_id</th><th title="timestamp[us]">collector_tstamp</th>' in page
    assert "<td>e0</td><td>2026-11-01 09:00:00</td><td>https://shop.example/p/0</td>" in page
    assert "<td>e1</td><td>2026-11-01 09:01:00</td><td>NULL</td>" in page
    assert "{&quot;schema&quot;: &quot;iglu:com.acme/product/1-0-0&quot;" in page
    assert "<td>e19</td>" in page and "<td>e20</td>" not in page, "20 rows, over two files"


def test_an_owner_previews_any_attempt_and_a_shared_reader_only_published_ones(
    make_job, table, team, client
):
    job = make_job("shred", steps=1)
    old = publish(job, table, EVENTS[:1])
    (step,) = steps_of(job)
    rebuilt = write(table, old.batch_id, InstanceExecFactory(process=step).pk, EVENTS[5:7])
    partitions.publish(old.batch_id)
    client.force_login(team.viewer)
    page = client.get(f"/tables/{table.pk}/", {"preview": old.pk}).content.decode()
    assert "(replaced, not what readers see)" in page
    assert "<td>e0</td>" in page and "<td>e5</td>" not in page
    for odd in ("x", "²", "9" * 30):
        assert client.get(f"/tables/{table.pk}/", {"preview": odd}).status_code == 404

    url = f"/api/v1/tables/{table.pk}/preview/"
    client.force_login(team.outsider)
    assert client.get(f"/tables/{table.pk}/").status_code == 404
    assert api_as(team.outsider).get(url).status_code == 404
    tables.share(team.admin, table, team.other_group)
    shared = client.get(f"/tables/{table.pk}/").content.decode()
    assert "<td>e5</td><td>" in shared and "<td>e6</td>" in shared
    assert client.get(f"/tables/{table.pk}/", {"preview": old.pk}).status_code == 404
    assert api_as(team.outsider).get(url, {"partition": old.pk}).status_code == 404
    assert api_as(team.outsider).get(url).json()["partition"]["id"] == rebuilt.pk


def test_the_api_gives_the_columns_and_rows_asked_for(make_job, table, team):
    job = make_job("shred", steps=1)
    first = publish(job, table, EVENTS[:3])
    publish(job, table, EVENTS[10:12])
    url = f"/api/v1/tables/{table.pk}/preview/"
    viewer = api_as(team.viewer)

    body = viewer.get(url, {"partition": first.pk, "rows": 2}).json()
    assert body["columns"][:2] == [
        {"name": "event_id", "type": "string"},
        {"name": "collector_tstamp", "type": "timestamp[us]"},
    ]
    assert [row[0] for row in body["rows"]] == ["e0", "e1"]
    assert (body["more"], body["partition"]["batch"]) == (True, first.batch_id)
    assert [r[0] for r in viewer.get(url).json()["rows"]] == ["e10", "e11"], "the newest"
    too_many = viewer.get(url, {"rows": 201})
    assert too_many.status_code == 400 and "200" in str(too_many.json()["rows"])
    assert viewer.get(url, {"partition": 10**9}).status_code == 404


def test_files_removed_or_broken_are_explained_not_a_server_error(make_job, table, team, client):
    job = make_job("shred", steps=1)
    broken = publish(job, table, EVENTS[:2])
    (Path(broken.location) / "part-00000.parquet").write_bytes(b"not parquet at all")
    client.force_login(team.viewer)
    page = client.get(f"/tables/{table.pk}/").content.decode()
    assert "part-00000.parquet is not a readable Parquet file" in page
    assert broken.location not in page, "a page shows no folder of an attempt"
    answer = api_as(team.viewer).get(f"/api/v1/tables/{table.pk}/preview/")
    assert answer.status_code == 404
    assert answer.json()["code"] == 121

    Partition.objects.filter(pk=broken.pk).update(
        state=Partition.State.REPLACED, removed_at=datetime(2026, 11, 2, 8, 30, tzinfo=UTC)
    )
    gone = client.get(f"/tables/{table.pk}/", {"preview": broken.pk}).content.decode()
    assert "the files of batch" in gone and "were removed 2026-11-02 08:30 UTC (replaced)" in gone
    empty = client.get(f"/tables/{table.pk}/").content.decode()
    assert "No partition published yet" in empty


def test_an_empty_batch_shows_that_it_holds_no_rows(make_job, table, team, client):
    publish(make_job("shred", steps=1), table, [])
    client.force_login(team.viewer)
    page = client.get(f"/tables/{table.pk}/").content.decode()
    assert "The partition holds no rows" in page


@pytest.fixture
def on_s3(make_job, team, s3_endpoint, settings):
    """A table in a bucket of its own on the S3 endpoint, with SPARK_CONF's options for it,
    and ``publish(put)``: a run of a job whose step writes the table's partition, ``put``
    being called with the bucket's client, the bucket and the attempt's key prefix first."""
    from batches.ingest.storage import s3_client

    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    client = s3_client(endpoint_url=s3_endpoint, region="us-east-1")
    client.create_bucket(Bucket=bucket)
    settings.SPARK_CONF = {
        f"spark.hadoop.fs.s3a.bucket.{bucket}.{key}": value
        for key, value in {
            "endpoint": s3_endpoint,
            "connection.ssl.enabled": "false",
            "access.key": "testing",
            "secret.key": "testing",
        }.items()
    }
    table = HiveTableFactory(
        bus_domain=team.application, table_name="events", location=f"s3a://{bucket}/events"
    )
    job = make_job("shred", steps=1)
    (step,) = steps_of(job)

    def publish(put, rows: int) -> None:
        batch = lifecycle.init_job(job.pk).target_batch_id
        step_run = lifecycle.init_step(step.pk)
        location = partitions.attempt_location(table, batch, step_run)
        put(client, bucket, location.split(f"{bucket}/", 1)[1])
        partitions.record_written(
            table, batch_id=batch, step_run_id=step_run, location=location, rows=rows, size=1
        )
        lifecycle.halt_step(step.pk)
        lifecycle.halt_job(job.pk)

    return table, client, bucket, publish


def test_a_partition_on_s3_is_read_in_ranges_without_fetching_whole_files(
    team, on_s3, monkeypatch, tmp_path
):
    from batches import preview

    table, _, _, publish = on_s3
    # Six row groups of 100 rows, each value 5,000 random characters: the first rows are in
    # the first group, and only it and the footer need reading.
    big = [{**e, "page_url": os.urandom(2500).hex()} for e in EVENTS * 20]
    local = write_parquet(tmp_path / "part.parquet", big, group=100)

    def put(client, bucket, prefix):
        client.put_object(
            Bucket=bucket, Key=f"{prefix}/part-00000.parquet", Body=local.read_bytes()
        )

    publish(put, rows=600)
    monkeypatch.setattr(preview, "READ_BYTES", 64 << 10)
    fetched: list[int] = []
    listing_client = partitions._s3_client

    def counting(name):
        counted = listing_client(name)
        get = counted.get_object

        def get_object(**kw):
            answer = get(**kw)
            fetched.append(answer["ContentLength"])
            return answer

        counted.get_object = get_object
        return counted

    monkeypatch.setattr(partitions, "_s3_client", counting)

    body = api_as(team.viewer).get(f"/api/v1/tables/{table.pk}/preview/", {"rows": 3}).json()
    assert [r[0] for r in body["rows"]] == ["e0", "e1", "e2"]
    assert len(body["rows"][0][2]) == 300 and body["rows"][0][2].endswith("…"), "cut at 300"
    assert body["more"] is True
    assert 0 < sum(fetched) < local.stat().st_size / 3, "the footer and one row group"


def test_a_store_that_cannot_be_read_is_explained_not_a_server_error(team, on_s3):
    table, client, bucket, publish = on_s3
    publish(lambda *_: None, rows=1)
    client.delete_bucket(Bucket=bucket)  # the store went away under the published partition

    answer = api_as(team.viewer).get(f"/api/v1/tables/{table.pk}/preview/")
    assert answer.status_code == 404
    assert answer.json()["message"].endswith("its folder could not be listed (StorageError)")
