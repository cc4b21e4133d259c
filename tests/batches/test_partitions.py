"""Write, audit, publish (batches/partitions.py): what a step writes is seen by its own job's
later steps at once, by everyone else only once the job has ended well, whole; a failed
attempt is never seen and its files go; a replaced partition's files go after the grace.
Driven through the lifecycle as a scheduler drives it; the Spark side, where the files are
written, is in tests/processes/step_kinds/test_publish.py."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from batches import partitions, queue
from batches.models import BatchState, Partition
from processes import lifecycle
from tests.helpers.factories import BatchFactory, HiveTableFactory, InstanceExecFactory
from tests.helpers.lifecycle import feed, queued, run_job, steps_of

# backends: a partial unique constraint and the halt's one transaction.
pytestmark = [pytest.mark.django_db, pytest.mark.backends]
State = Partition.State


@pytest.fixture
def table(team, tmp_path):
    return HiveTableFactory(
        bus_domain=team.application, dbname="lake", table_name="events", location=str(tmp_path)
    )


def write(table, batch_id: int, step_run_id: int, rows: int = 3) -> Partition:
    """What spark_io.write_batch leaves: the attempt's folder with a file, and its record."""
    location = partitions.attempt_location(table, batch_id, step_run_id)
    Path(location).mkdir(parents=True)
    (Path(location) / "part-0.parquet").write_bytes(b"x" * rows)
    return partitions.record_written(
        table,
        batch_id=batch_id,
        step_run_id=step_run_id,
        location=location,
        rows=rows,
        size=partitions.size_of(location),
    )


def seen(table, own_batch=None) -> dict[int, int]:
    """batch -> the step run whose partition a reader sees."""
    return {p.batch_id: p.step_run_id for p in partitions.visible(table, own_batch=own_batch)}


def test_a_partition_is_seen_by_its_jobs_later_steps_at_once_and_by_others_once_published(
    make_job, table
):
    job = make_job("shred", steps=2)
    first, second = steps_of(job)
    run = lifecycle.init_job(job.pk)
    batch = run.target_batch_id
    step_run = lifecycle.init_step(first.pk)
    written = write(table, batch, step_run)
    assert written.location.endswith(f"/batch_id={batch}/run-{step_run}")
    assert written.bytes == 3
    # Not even the job itself reads what a step wrote before the step has ended well.
    assert seen(table, own_batch=batch) == {}
    lifecycle.halt_step(first.pk)
    assert seen(table, own_batch=batch) == {batch: step_run}
    assert seen(table) == {}, "another job, a replay and the catalog see nothing yet"

    lifecycle.init_step(second.pk)
    lifecycle.halt_step(second.pk)
    lifecycle.halt_job(job.pk)
    written.refresh_from_db()
    assert written.state == State.PUBLISHED
    assert written.published_at is not None
    assert seen(table) == {batch: step_run}


def test_a_failed_attempt_is_never_seen_and_the_reaper_removes_its_files_at_once(make_job, table):
    job = make_job("shred", steps=2)
    first, second = steps_of(job)
    run = lifecycle.init_job(job.pk)
    lifecycle.init_step(first.pk)
    lifecycle.halt_step(first.pk)
    broken = lifecycle.init_step(second.pk)
    failed = write(table, run.target_batch_id, broken)
    lifecycle.term_step(second.pk, "broke mid-write")
    lifecycle.term_job(job.pk, "broke mid-write")

    assert seen(table, own_batch=run.target_batch_id) == {}
    assert partitions.remove_unused() == [failed.pk]
    failed.refresh_from_db()
    assert (failed.state, failed.removed_at is not None) == (State.DISCARDED, True)
    assert not Path(failed.location).exists()
    assert partitions.remove_unused() == [], "removed once"


def test_a_rerun_publishes_what_the_step_it_skipped_wrote_before(make_job, table):
    job = make_job("shred", steps=2)
    first, second = steps_of(job)
    run = lifecycle.init_job(job.pk)
    kept = write(table, run.target_batch_id, lifecycle.init_step(first.pk))
    lifecycle.halt_step(first.pk)
    lifecycle.init_step(second.pk)
    lifecycle.term_step(second.pk, "broke")
    lifecycle.term_job(job.pk, "broke")
    assert partitions.remove_unused() == [], "a successful step's attempt waits for the re-run"

    rerun = lifecycle.init_job(job.pk)
    assert rerun.skipped_step_ids == [first.pk]
    lifecycle.init_step(second.pk)
    lifecycle.halt_step(second.pk)
    lifecycle.halt_job(job.pk)
    kept.refresh_from_db()
    assert kept.state == State.PUBLISHED
    assert Path(kept.location).exists()


def test_a_rebuilt_batch_replaces_the_published_partition_whose_files_go_after_the_grace(
    make_job, table, settings
):
    settings.BDRE_PARTITION_GRACE_SECONDS = 600
    job = make_job("shred", steps=1)
    (step,) = steps_of(job)
    run = lifecycle.init_job(job.pk)
    batch = run.target_batch_id
    old = write(table, batch, lifecycle.init_step(step.pk))
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)

    # A rebuild of the batch (a replay's re-run): another attempt, published in its place.
    new = write(table, batch, InstanceExecFactory(process=step).pk, rows=5)
    published = partitions.publish(batch)
    assert [p.pk for p in published] == [new.pk]
    old.refresh_from_db()
    assert (old.state, seen(table)) == (State.REPLACED, {batch: new.step_run_id})

    now = timezone.now()
    assert partitions.remove_unused(now + timedelta(seconds=599)) == []
    assert Path(old.location).exists(), "a query planned on the old partition can finish"
    assert partitions.remove_unused(now + timedelta(seconds=601)) == [old.pk]
    assert not Path(old.location).exists()
    assert Path(new.location).exists()


@pytest.fixture
def make_step_run(make_job):
    job = make_job("wide", steps=1)

    def make():
        return InstanceExecFactory(process=steps_of(job)[0]).pk

    return make


def test_publishing_twenty_partitions_takes_a_fixed_number_of_statements(
    team, tmp_path, make_step_run, django_assert_max_num_queries
):
    batch = BatchFactory(bus_domain=team.application).pk
    step_run = make_step_run()
    for n in range(20):
        t = HiveTableFactory(bus_domain=team.application, location=str(tmp_path / f"t{n}"))
        write(t, batch, step_run)
    with django_assert_max_num_queries(6):
        published = partitions.publish(batch)
    assert len(published) == 20
    assert {p.state for p in published} == {State.PUBLISHED}


def test_the_database_keeps_a_batch_to_one_published_partition(team, table, make_step_run):
    batch = BatchFactory(bus_domain=team.application).pk
    one, two = write(table, batch, make_step_run()), write(table, batch, make_step_run())
    Partition.objects.filter(pk=one.pk).update(state=State.PUBLISHED)
    with pytest.raises(IntegrityError), transaction.atomic():
        Partition.objects.filter(pk=two.pk).update(state=State.PUBLISHED)


def test_a_table_written_in_place_before_the_upgrade_keeps_every_batch_in_view(
    make_job, table, tmp_path
):
    from django.core.management import call_command

    # Two batches as write_batch left them before attempts had folders of their own, and
    # a folder that is no batch of BDRE's.
    old_batches = [BatchFactory(bus_domain=table.bus_domain).pk for _ in range(2)]
    for batch in old_batches:
        folder = Path(table.location) / f"batch_id={batch}"
        folder.mkdir()
        (folder / "part-0.parquet").write_bytes(b"rows")
        (folder / "_SUCCESS").write_bytes(b"")
    (Path(table.location) / "batch_id=999999" / "part-0.parquet").parent.mkdir()
    (Path(table.location) / "batch_id=999999" / "part-0.parquet").write_bytes(b"?")

    # The table's first write by attempt: a rebuild of the second batch.
    job = make_job("shred", steps=1)
    rebuild = write(table, old_batches[1], InstanceExecFactory(process=steps_of(job)[0]).pk)
    partitions.publish(old_batches[1])

    legacy = {p.batch_id: p for p in Partition.objects.filter(table=table, step_run=None)}
    assert legacy[old_batches[0]].state == State.PUBLISHED
    assert legacy[old_batches[1]].state == State.REPLACED, "the rebuild is published"
    assert seen(table) == {old_batches[0]: None, old_batches[1]: rebuild.step_run_id}
    first = Path(legacy[old_batches[0]].location)
    assert first == Path(table.location) / f"batch_id={old_batches[0]}" / "legacy"
    assert sorted(f.name for f in first.iterdir()) == ["_SUCCESS", "part-0.parquet"]
    assert (Path(table.location) / "batch_id=999999" / "part-0.parquet").exists()

    # A table nobody has written since: the upgrade's command adopts it, and only it.
    idle = HiveTableFactory(bus_domain=table.bus_domain, location=str(tmp_path / "idle"))
    (tmp_path / "idle" / f"batch_id={old_batches[0]}").mkdir(parents=True)
    (tmp_path / "idle" / f"batch_id={old_batches[0]}" / "part-0.parquet").write_bytes(b"r")
    out = io.StringIO()
    call_command("adopt_partitions", stdout=out)
    assert out.getvalue().splitlines() == [
        f"{idle}: adopted batch {old_batches[0]}",
        "1 partition(s) adopted.",
    ]
    assert seen(idle) == {old_batches[0]: None}

    # The reaper removes the replaced legacy files only, after the grace.
    partitions.remove_unused(timezone.now() + timedelta(days=1))
    assert not (Path(table.location) / f"batch_id={old_batches[1]}" / "legacy").exists()
    assert Path(rebuild.location).exists()


def test_the_api_lists_a_tables_published_partitions_and_every_attempt_on_request(
    make_job, table, team
):
    from tests.helpers.api import api_as

    job = make_job("shred", steps=1)
    (step,) = steps_of(job)
    batch = lifecycle.init_job(job.pk).target_batch_id
    first = write(table, batch, lifecycle.init_step(step.pk), rows=3)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)
    rebuilt = write(table, batch, InstanceExecFactory(process=step).pk, rows=5)
    partitions.publish(batch)

    url = f"/api/v1/tables/{table.pk}/partitions/"
    viewer = api_as(team.viewer)
    (published,) = viewer.get(url).json()["results"]
    assert published["id"] == rebuilt.pk
    assert (published["batch"], published["state"], published["rows"]) == (batch, "published", 5)
    assert published["location"].endswith(f"/batch_id={batch}/run-{rebuilt.step_run_id}")
    every = viewer.get(url, {"state": "all"}).json()["results"]
    assert [(p["id"], p["state"]) for p in every] == [
        (rebuilt.pk, "published"),
        (first.pk, "replaced"),
    ]
    assert every[1]["job_run"] == first.step_run.parent_id
    refused = viewer.get(url, {"state": "some"})
    assert (refused.status_code, refused.json()["state"]) == (400, "published or all")
    outsider = api_as(team.outsider)
    assert outsider.get(url).status_code == 404


def test_the_table_page_shows_its_columns_and_partitions_and_the_batch_page_links_it(
    make_job, table, team, client
):
    table.ddl = "struct<event_id:string,`page view`:int,context:struct<a:int,b:array<string>>>"
    table.save()
    job = make_job("shred", steps=1)
    (step,) = steps_of(job)
    batch = lifecycle.init_job(job.pk).target_batch_id
    first = write(table, batch, lifecycle.init_step(step.pk), rows=3)
    Partition.objects.filter(pk=first.pk).update(
        checks=[{"rule": "event_id_present", "checked": 3, "failed": 1, "table": "events"}]
    )
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)
    rebuilt = write(table, batch, InstanceExecFactory(process=step).pk, rows=5)
    partitions.publish(batch)

    client.force_login(team.viewer)
    page = client.get(f"/tables/{table.pk}/").content.decode()
    assert "<td>event_id</td><td><code>string</code></td>" in page
    assert "<td>page view</td><td><code>int</code></td>" in page
    assert "<td>context</td><td><code>struct&lt;a:int,b:array&lt;string&gt;&gt;</code></td>" in page
    assert "1 partition" in page
    assert f'<a href="/batches/{batch}/">{batch}</a>' in page
    assert "<td>5</td>" in page and "<td>3</td>" not in page, "the published one only"
    every = client.get(f"/tables/{table.pk}/", {"attempts": "all"}).content.decode()
    assert "<td>replaced</td>" in every and "<td>published</td>" in every
    assert "event_id_present ✗ 1" in every
    assert f"run {first.step_run.parent_id}" in every
    assert rebuilt.location not in every, "a page shows no folder of an attempt"

    batch_page = client.get(f"/batches/{batch}/").content.decode()
    assert f'<a href="/tables/{table.pk}/">lake.events</a></td><td>5</td>' in batch_page
    client.force_login(team.outsider)
    assert client.get(f"/tables/{table.pk}/").status_code == 404


def test_a_table_a_rerun_no_longer_writes_is_not_published_from_the_failed_runs_attempt(
    make_job, table, team, tmp_path
):
    bad = HiveTableFactory(bus_domain=team.application, location=str(tmp_path / "bad"))
    job = make_job("load", steps=2, can_recover=False)
    first, second = steps_of(job)
    run = lifecycle.init_job(job.pk)
    batch = run.target_batch_id
    loaded = lifecycle.init_step(first.pk)
    write(table, batch, loaded)
    stale = write(bad, batch, loaded)  # the first attempt found bad rows
    lifecycle.halt_step(first.pk)
    lifecycle.init_step(second.pk)
    lifecycle.term_step(second.pk, "broke")
    lifecycle.term_job(job.pk, "broke")

    rerun = lifecycle.init_job(job.pk)
    assert rerun.skipped_step_ids == [], "no recovery point: every step runs again"
    again = lifecycle.init_step(first.pk)
    fresh = write(table, batch, again)  # ... and the second finds none
    lifecycle.halt_step(first.pk)
    # The run's later step sees what the run wrote, not the failed run's bad rows.
    own = {"own_batch": batch, "own_run": rerun.instance_exec_id}
    assert partitions.visible(table, **own) == [fresh]
    assert partitions.visible(bad, **own) == []
    lifecycle.init_step(second.pk)
    lifecycle.halt_step(second.pk)
    lifecycle.halt_job(job.pk)

    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (fresh.state, stale.state) == (State.PUBLISHED, State.DISCARDED)
    assert seen(bad) == {}


def test_a_shared_tables_readers_see_its_published_partitions_not_its_attempts(
    make_job, table, team, client
):
    from batches.models import TableShare
    from tests.helpers.api import api_as

    job = make_job("shred", steps=1)
    (step,) = steps_of(job)
    batch = lifecycle.init_job(job.pk).target_batch_id
    written = write(table, batch, lifecycle.init_step(step.pk), rows=3)
    lifecycle.halt_step(step.pk)
    lifecycle.halt_job(job.pk)
    TableShare.objects.create(table=table, team=team.other_group, created_by=team.admin)

    client.force_login(team.outsider)
    page = client.get(f"/tables/{table.pk}/", {"attempts": "all"}).content.decode()
    assert "A table another team shares with yours" in page
    assert "<td>3</td>" in page and "its team's run" in page
    assert f"run {written.step_run.parent_id}" not in page
    api = api_as(team.outsider)
    url = f"/api/v1/tables/{table.pk}/partitions/"
    assert [p["id"] for p in api.get(url).json()["results"]] == [written.pk]
    refused = api.get(url, {"state": "all"})
    assert refused.status_code == 403
    assert "a shared table's readers see its published partitions" in refused.content.decode()


def run_writing(job, table, *, fail=False):
    """A whole run whose first step writes ``table``, as a Spark step does, and whose last
    fails when ``fail``."""
    first, *_, last = steps_of(job)

    def body(step, step_run, result):
        if step == first:
            write(table, result.target_batch_id, step_run)

    return run_job(job, max_batch=1, fail_step=last if fail else None, on_step=body)


def test_a_given_up_batchs_attempts_are_removed_and_a_requeue_rebuilds_it_whole(make_job, table):
    feeder = make_job("feeder")
    job = make_job("shred", steps=2, upstream=[feeder], max_retries=1)
    first, second = steps_of(job)
    feed(feeder, ["2026-11-01"])
    batch = run_writing(job, table, fail=True).target_batch_id
    kept = Partition.objects.get(batch_id=batch)  # written by the step that succeeded
    assert {r.batch_state_id for r in queued(first) + queued(second)} == {BatchState.DISCARDED}

    # In the dead letter nothing rebuilds the batch: what its steps wrote is never published.
    assert partitions.remove_unused() == [kept.pk]
    kept.refresh_from_db()
    assert (kept.state, kept.removed_at is not None) == (State.DISCARDED, True)
    assert not Path(kept.location).exists()

    # Requeued, the batch is rebuilt whole: the step whose files are gone runs again.
    queue.requeue(queued(first)[0].pk)
    rerun = run_writing(job, table)
    assert (rerun.target_batch_id, rerun.skipped_step_ids) == (batch, [])
    (published,) = partitions.published(table)
    assert published.batch_id == batch
    assert published.step_run.parent_id == rerun.instance_exec_id
    assert Path(published.location).exists()


def test_a_step_rebuilt_after_its_attempt_was_removed_is_a_recovery_point_again(make_job, table):
    feeder = make_job("feeder")
    job = make_job("shred", steps=2, upstream=[feeder], max_retries=1)
    first, _ = steps_of(job)
    feed(feeder, ["2026-11-01"])
    run_writing(job, table, fail=True)
    assert len(partitions.remove_unused()) == 1  # given up: the first step's attempt goes
    queue.requeue(queued(first)[0].pk)
    rebuilt = run_writing(job, table, fail=True)  # the first step again, the second fails
    assert rebuilt.skipped_step_ids == []
    queue.requeue(queued(first)[0].pk)
    # Its new attempt stands: the removed one before it no longer counts.
    assert run_writing(job, table).skipped_step_ids == [first.pk]


def test_a_batch_requeued_before_the_reaper_keeps_its_attempts_for_the_rerun(make_job, table):
    feeder = make_job("feeder")
    job = make_job("shred", steps=2, upstream=[feeder], max_retries=1)
    first, second = steps_of(job)
    feed(feeder, ["2026-11-01"])
    batch = run_writing(job, table, fail=True).target_batch_id
    kept = Partition.objects.get(batch_id=batch)

    queue.requeue(queued(second)[0].pk)
    assert partitions.remove_unused() == [], "waiting again for its re-run"
    rerun = run_writing(job, table)
    assert rerun.skipped_step_ids == [first.pk]
    kept.refresh_from_db()
    assert kept.state == State.PUBLISHED and Path(kept.location).exists()
