"""The run page says what each step read and wrote (processes/selectors/run_io.py): the
batches it consumed with their files, the tables it read, the partitions it wrote with their
rows and state, and its properties (its SQL among them); a table links its page only for a
user who may see it."""

from __future__ import annotations

from pathlib import Path

import pytest

from batches import partitions
from batches.models import Batch, HiveTable
from processes.models import InstanceExec
from tests.helpers.factories import FileFactory, HiveTableFactory
from tests.helpers.jobs import build_job, sql_step
from tests.helpers.lifecycle import run_job

pytestmark = pytest.mark.django_db

QUERY = (
    "SELECT to_date(collector_tstamp) AS day, count(*) AS page_views FROM lake.events GROUP BY 1"
)


def test_a_run_page_shows_the_batches_tables_and_partitions_each_step_read_and_wrote(
    team, make_job, client, tmp_path
):
    events = HiveTableFactory(
        bus_domain=team.application, dbname="lake", table_name="events", location=str(tmp_path)
    )
    ingest = make_job("ingest", steps=1)
    daily = build_job(team, "daily", [sql_step("daily_sql", QUERY, upstream=[ingest])])
    run_job(ingest)
    source = Batch.objects.order_by("-id").first()
    FileFactory(batch=source, path="/landing/events_1.tsv", file_size=2048)
    FileFactory(batch=source, path="/landing/events_2.tsv", file_size=2048)
    result = run_job(daily, max_batch=10**9)
    step_run = InstanceExec.objects.get(parent_id=result.instance_exec_id)
    InstanceExec.objects.filter(pk=step_run.pk).update(inputs=["lake.events"])
    summary = HiveTable.objects.create(
        team=team.group,
        bus_domain=team.application,
        dbname="lake",
        table_name="daily_page_views",
        location=str(tmp_path / "daily"),
    )
    location = partitions.attempt_location(summary, result.target_batch_id, step_run.pk)
    Path(location).mkdir(parents=True)
    partitions.record_written(
        summary,
        batch_id=result.target_batch_id,
        step_run_id=step_run.pk,
        location=location,
        rows=1,
        size=10,
    )
    partitions.publish(result.target_batch_id)
    client.force_login(team.viewer)

    page = client.get(f"/runs/{result.instance_exec_id}/").content.decode()
    assert f'<a href="/batches/{source.pk}/">batch {source.pk}</a> (2 files, 4.0\xa0KB)' in page
    assert f'<dt>read</dt><dd><a href="/tables/{events.pk}/">lake.events</a></dd>' in page
    assert (
        f'<dt>wrote</dt><dd><a href="/tables/{summary.pk}/">lake.daily_page_views</a>: 1 row, '
        "published</dd>"
    ) in page
    assert "<h4>sql</h4>" in page and f"<pre>{QUERY}</pre>" in page
    assert "files-written" not in page
    ingest_page = client.get(f"/runs/{ingest.runs.first().pk}/").content.decode()
    assert "no batch from the queue" in ingest_page and "no table partition" in ingest_page


def test_an_export_run_page_lists_the_files_it_wrote(team, make_job, client):
    export = make_job("export", steps=1)
    result = run_job(export)
    written = [{"path": "s3://exports/daily/batch_id=7/part-00000.csv", "bytes": 3072}]
    InstanceExec.objects.filter(parent_id=result.instance_exec_id).update(files_written=written)
    client.force_login(team.viewer)

    page = client.get(f"/runs/{result.instance_exec_id}/").content.decode()
    assert (
        '<dt>files</dt><dd class="files-written"><code>s3://exports/daily/batch_id=7/'
        "part-00000.csv</code> (3.0\xa0KB)</dd>"
    ) in page
    step_run = InstanceExec.objects.get(parent_id=result.instance_exec_id)
    answer = client.get(f"/api/v1/runs/{step_run.pk}/").json()
    assert answer["files_written"] == written
