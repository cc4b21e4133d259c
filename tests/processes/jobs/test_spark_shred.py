"""``spark.shred`` end to end: files registered by a scan, claimed by init_job, shredded and
deduplicated by the orchestrator, with both manifest backends."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from batches.models import EventManifest, HiveTable
from processes import orchestrator
from processes.models import InstanceExec, Property
from tests.data.enriched import EventFactory, line_of
from tests.processes.pipelines import shred_pipeline

pytestmark = pytest.mark.django_db


@pytest.fixture
def lake(tmp_path, settings, spark):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing = tmp_path / "landing"
    landing.mkdir()
    return landing


@pytest.fixture
def pipeline(team, lake):
    def make(manifest: str = "database", ttl_days: int = 180, **dedup: str):
        return shred_pipeline(team.application, lake, manifest=manifest, ttl_days=ttl_days, **dedup)

    return make


def land(lake: Path, name: str, lines: list[str]) -> None:
    (lake / name).write_text("\n".join(lines) + "\n")


def shred_counters(job) -> dict:
    step = job.steps.get(name="shred_events")
    return InstanceExec.objects.filter(process=step).order_by("-id").first().counters


def atomic_rows(spark, settings, job_run_target: int | None = None):
    df = spark.read.parquet(str(settings.BDRE_WAREHOUSE / "lake" / "events"))
    if job_run_target is not None:
        df = df.filter(df.batch_id == job_run_target)
    return df


def run(ingest, shred_job):
    assert orchestrator.run_job(ingest.pk).succeeded
    return orchestrator.run_job(shred_job.pk)


def accounted(c: dict) -> bool:
    removed = c["dup_in_batch_natural"] + c["dup_cross_batch_natural"]
    return c["rows_in"] == c["rows_out"] + c["bad_rows"] + removed


@pytest.mark.parametrize("manifest", ["database", "parquet"])
def test_shred_counts_every_row_and_writes_the_tables(pipeline, lake, spark, settings, manifest):
    ingest, shred_job = pipeline(manifest)
    factory = EventFactory(seed=11)
    lines, _ = factory.batch(200, natural=0.05, synthetic=0.05, malformed=0.02)
    land(lake, "part-0001.tsv", lines[:120])
    land(lake, "part-0002.tsv", lines[120:])
    outcome = run(ingest, shred_job)
    assert outcome.succeeded, outcome.error
    c = shred_counters(shred_job)
    assert c["rows_in"] == len(lines) == 224
    assert c["bad_rows"] == 4
    assert c["dup_in_batch_natural"] == 10
    assert c["dup_in_batch_synthetic"] == 20  # 10 pairs: both events of each get new ids
    assert c["rows_out"] == 210
    assert accounted(c)
    out = atomic_rows(spark, settings, outcome.target_batch_id)
    assert out.count() == 210
    assert out.select("event_id").distinct().count() == 210
    names = set(HiveTable.objects.filter(dbname="lake").values_list("table_name", flat=True))
    assert {
        "events",
        "events_bad",
        "com_acme_page_1",
        "com_snowplowanalytics_snowplow_duplicate_1",
    } <= names
    bad = spark.read.parquet(str(settings.BDRE_WAREHOUSE / "lake" / "events_bad"))
    assert {r["source_file"].rsplit("/", 1)[-1] for r in bad.collect()} <= {
        "part-0001.tsv",
        "part-0002.tsv",
    }
    run_row = InstanceExec.objects.get(process__name="shred_events")
    assert run_row.spark_application_id.startswith("local-")


@pytest.mark.parametrize("manifest", ["database", "parquet"])
def test_a_later_batch_repeating_events_drops_them_and_a_rerun_drops_nothing(
    pipeline, lake, spark, settings, manifest
):
    ingest, shred_job = pipeline(manifest)
    factory = EventFactory(seed=12)
    first_lines, first_events = factory.batch(100)
    land(lake, "a.tsv", first_lines)
    first = run(ingest, shred_job)
    assert shred_counters(shred_job)["rows_out"] == 100

    # The same batch again (a re-run of the same target batch) drops nothing.
    Property.objects.create(
        process=shred_job.steps.get(name="after"),
        config_group="callable",
        key="path",
        value="tests.processes.jobs.test_spark_shred.fail_once",
    )
    lines, _ = factory.batch(50, repeat_from=first_events, repeat=0.2)
    land(lake, "b.tsv", lines)
    FAILED.clear()
    failed = run(ingest, shred_job)
    assert not failed.succeeded
    rerun = orchestrator.run_job(shred_job.pk)
    assert rerun.succeeded and rerun.is_rerun
    assert rerun.target_batch_id == failed.target_batch_id
    c = shred_counters(shred_job)
    assert c["dup_cross_batch_natural"] == 10  # the repeats of batch one, and only them
    assert c["rows_out"] == 50
    assert accounted(c)
    # The re-run replaced its partition: no event twice.
    second = atomic_rows(spark, settings, rerun.target_batch_id)
    assert second.count() == second.select("event_id").distinct().count() == 50
    assert atomic_rows(spark, settings, first.target_batch_id).count() == 100


FAILED: list[int] = []


def fail_once(context):
    if not FAILED:
        FAILED.append(context.step_run_id)
        raise RuntimeError("downstream step broke once")
    return {}


@pytest.mark.parametrize("manifest", ["database", "parquet"])
def test_cross_batch_synthetic_gets_a_new_id_and_the_duplicate_context(
    pipeline, lake, spark, settings, manifest
):
    ingest, shred_job = pipeline(manifest)
    factory = EventFactory(seed=13)
    first_lines, first_events = factory.batch(20)
    land(lake, "a.tsv", first_lines)
    run(ingest, shred_job)
    reused = first_events[0]["event_id"]
    from tests.data.enriched import line_of

    land(lake, "b.tsv", [line_of(factory.event(event_id=reused))])
    second = run(ingest, shred_job)
    c = shred_counters(shred_job)
    assert (c["dup_cross_batch_synthetic"], c["dup_cross_batch_natural"]) == (1, 0)
    (row,) = atomic_rows(spark, settings, second.target_batch_id).collect()
    assert row["event_id"] != reused
    duplicate = spark.read.parquet(
        str(settings.BDRE_WAREHOUSE / "lake" / "com_snowplowanalytics_snowplow_duplicate_1")
    ).filter(f"batch_id = {second.target_batch_id}")
    (ctx,) = duplicate.collect()
    assert ctx["root_id"] == row["event_id"]
    assert reused in ctx["data"]


def test_an_expired_database_manifest_entry_no_longer_drops(pipeline, lake, spark, settings):
    ingest, shred_job = pipeline("database", ttl_days=1)
    factory = EventFactory(seed=14)
    lines, _ = factory.batch(10)
    land(lake, "a.tsv", lines)
    run(ingest, shred_job)
    EventManifest.objects.update(etl_time=timezone.now() - timedelta(days=2))
    land(lake, "b.tsv", lines)
    run(ingest, shred_job)
    c = shred_counters(shred_job)
    assert c["dup_cross_batch_natural"] == 0 and c["rows_out"] == 10


def test_an_expired_parquet_manifest_partition_is_pruned(pipeline, lake, spark, settings):
    ingest, shred_job = pipeline("parquet", ttl_days=1)
    factory = EventFactory(seed=15)
    lines, _ = factory.batch(10)
    land(lake, "a.tsv", lines)
    run(ingest, shred_job)
    root = settings.BDRE_WAREHOUSE / "manifests" / "default"
    (today,) = root.glob("etl_date=*")
    today.rename(root / "etl_date=2000-01-01")
    land(lake, "b.tsv", lines)
    run(ingest, shred_job)
    c = shred_counters(shred_job)
    assert c["dup_cross_batch_natural"] == 0 and c["rows_out"] == 10
    assert not (root / "etl_date=2000-01-01").exists()


def test_strategies_can_be_switched_off(pipeline, lake, spark, settings):
    ingest, shred_job = pipeline("none", in_batch_natural="false", in_batch_synthetic="false")
    lines, _ = EventFactory(seed=16).batch(30, natural=0.1, synthetic=0.1)
    land(lake, "a.tsv", lines)
    run(ingest, shred_job)
    c = shred_counters(shred_job)
    assert c["rows_out"] == 36
    assert c["dup_in_batch_natural"] == c["dup_in_batch_synthetic"] == 0


def test_unreadable_contexts_are_kept_with_their_reason_and_the_event_is_kept(
    pipeline, lake, spark, settings
):
    ingest, shred_job = pipeline("none")
    factory = EventFactory(seed=5)
    good = factory.event(kind="page_view")
    broken = factory.event(kind="page_view") | {"contexts": "{not json"}
    land(lake, "part-0001.tsv", [line_of(good), line_of(broken)])
    outcome = run(ingest, shred_job)
    assert outcome.succeeded, outcome.error
    c = shred_counters(shred_job)
    assert (c["rows_out"], c["bad_rows"], c["bad_entities"]) == (2, 0, 1)
    bad = spark.read.parquet(str(settings.BDRE_WAREHOUSE / "lake" / "events_bad_entities"))
    (row,) = bad.collect()
    assert (row["root_id"], row["source_column"], row["json"]) == (
        broken["event_id"],
        "contexts",
        "{not json",
    )
    assert row["reason"].startswith("contexts is not a JSON object")
    assert HiveTable.objects.filter(dbname="lake", table_name="events_bad_entities").exists()
