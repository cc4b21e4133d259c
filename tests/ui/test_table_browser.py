"""In a real browser: from a batch to the table it wrote, its columns, its first rows (read
by Spark when asked, as a worker of the Spark queue reads them: Celery's eager mode here) and
its partitions, at desktop and phone width; and from a file's name to its batch, the batch
made of it, and the table that wrote. Screenshots go to ``var/screenshots/``
(``table-*.png``, ``follow-file-*.png``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from batches import partitions
from batches.models import File
from processes import lifecycle
from processes.models import InstanceExec
from tests.helpers.browser import OVERFLOW, log_in, shot
from tests.helpers.factories import HiveTableFactory
from tests.helpers.lifecycle import steps_of
from tests.helpers.parquet import write_parquet

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.browser,
    pytest.mark.spark,
    pytest.mark.usefixtures("spark", "eager"),
]


@pytest.mark.parametrize("width", [1366, 390])
def test_a_viewer_follows_a_batch_to_its_tables_columns_rows_and_partitions(
    team, make_job, live_server, browser, tmp_path, width
):
    table = HiveTableFactory(
        bus_domain=team.application,
        dbname="lake",
        table_name="atomic_events",
        location=str(tmp_path / "atomic_events"),
        ddl="struct<event_id:string,collector_tstamp:timestamp,page_url:string,"
        "contexts:array<struct<schema:string,data:string>>>",
    )
    job = make_job("shred", steps=1)
    (step,) = steps_of(job)
    batch = lifecycle.init_job(job.pk).target_batch_id
    step_run = lifecycle.init_step(step.pk)
    location = partitions.attempt_location(table, batch, step_run)
    events = [
        {"event_id": f"e{n}", "collector_tstamp": datetime(2026, 11, 1, 9, n % 60)}
        for n in range(713)
    ]
    write_parquet(Path(location) / "part-0.parquet", events)
    partitions.record_written(
        table, batch_id=batch, step_run_id=step_run, location=location, rows=713, size=2048
    )
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)

    page = log_in(browser, live_server, team.viewer, viewport=(width, 900))
    page.goto(f"{live_server.url}/batches/{batch}/")
    page.get_by_role("link", name="lake.atomic_events").click()
    page.wait_for_url(f"{live_server.url}/tables/{table.pk}/")
    assert page.get_by_role("heading", name="Table lake.atomic_events").is_visible()
    columns = page.locator("table").first.inner_text()
    for name, kind in [("event_id", "string"), ("collector_tstamp", "timestamp")]:
        assert f"{name}\t{kind}" in columns
    assert page.get_by_text(f"batch {batch}'s partition, 713 rows: a Spark worker").is_visible()
    shot(page, f"table-ask-{width}")
    page.get_by_role("button", name="Show the first 20 rows").click()
    rows = page.locator("table.preview").inner_text()
    assert rows.startswith(
        f"event_id\tcollector_tstamp\tbatch_id\ne0\t2026-11-01 09:00:00\t{batch}\n"
    )
    assert "e19\t" in rows and "e20\t" not in rows
    assert page.get_by_text(f"The first 20 rows of batch {batch}'s partition, of 713").is_visible()
    partitions_table = page.locator("table").nth(2).inner_text()
    assert f"{batch}\t713\t2.0\xa0KB" in partitions_table
    assert page.evaluate(OVERFLOW) <= 0, "no sideways scroll"
    shot(page, f"table-{width}")


def test_a_viewer_finds_a_files_batch_by_its_name_and_follows_it_to_the_table_it_fed(
    team, chain, live_server, browser, tmp_path
):
    """Task "follow a file": its name in the batches' search, its batch, the batch its job
    made of it (the provenance graph's node), and the table that batch wrote."""
    made = chain.targets["tidy"][0]
    run = InstanceExec.objects.get(parent__target_batch_id=made, process__parent=chain.tidy)
    table = HiveTableFactory(
        bus_domain=team.application,
        dbname="lake",
        table_name="tidy_rows",
        location=str(tmp_path / "tidy_rows"),
    )
    location = partitions.attempt_location(table, made, run.pk)
    write_parquet(Path(location) / "part-0.parquet", [{"line": "b.csv"}])
    partitions.record_written(
        table, batch_id=made, step_run_id=run.pk, location=location, rows=1, size=512
    )
    partitions.publish(made)
    file = File.objects.get(path__endswith="/b.csv")

    page = log_in(browser, live_server, team.viewer, viewport=(1366, 900))
    page.goto(f"{live_server.url}/batches/")
    page.fill("input[name=file]", "b.csv")
    page.click("text=Filter")
    page.get_by_role("link", name=str(file.batch_id), exact=True).click()
    page.wait_for_url(f"{live_server.url}/batches/{file.batch_id}/")
    assert "b.csv" in page.locator("table").last.inner_text()
    shot(page, "follow-file-batch")
    page.locator(f"svg a[href='/batches/{made}/']").first.click()
    page.wait_for_url(f"{live_server.url}/batches/{made}/")
    page.get_by_role("link", name="lake.tidy_rows").click()
    page.wait_for_url(f"{live_server.url}/tables/{table.pk}/")
    page.get_by_role("button", name="Show the first 20 rows").click()
    assert "b.csv" in page.locator("table.preview").inner_text()
    shot(page, "follow-file-table")
