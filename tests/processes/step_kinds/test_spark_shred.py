"""``spark.shred`` end to end: files registered by a scan, claimed by init_job, shredded and
deduplicated by the orchestrator, with both manifest backends."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from batches import queue
from batches.models import BatchConsumpQueue, BatchState, EventManifest, HiveTable
from processes import orchestrator
from processes.models import InstanceExec, Property
from processes.step_kinds import shred
from processes.step_kinds.manifest import open_manifest
from processes.step_kinds.shred_runner import STRATEGIES, shred_and_dedupe
from tests.helpers.enriched import CONTEXTS_SCHEMA, EventFactory, line_of
from tests.helpers.pipelines import shred_pipeline
from tests.helpers.spark import published

pytestmark = pytest.mark.django_db


def location(table: str) -> str:
    """Where the step's team keeps ``lake.<table>`` (its own folder under the warehouse)."""
    return HiveTable.objects.get(dbname="lake", table_name=table).location


@pytest.fixture
def lake(tmp_path, settings, spark):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing = tmp_path / "landing"
    landing.mkdir()
    return landing


@pytest.fixture
def pipeline(team, lake):
    def make(manifest: str = "database", ttl_days: int = 180, **options):
        return shred_pipeline(
            team.application, lake, manifest=manifest, ttl_days=ttl_days, **options
        )

    return make


def land(lake: Path, name: str, lines: list[str]) -> None:
    (lake / name).write_text("\n".join(lines) + "\n")


def shred_counters(job) -> dict:
    step = job.steps.get(name__endswith="shred_events")
    return InstanceExec.objects.filter(process=step).order_by("-id").first().counters


def atomic_rows(spark, settings, job_run_target: int | None = None):
    df = published(spark, location("events"))
    if job_run_target is not None:
        df = df.filter(df.batch_id == job_run_target)
    return df


def run(ingest, shred_job):
    assert orchestrator.run_job(ingest.pk).succeeded
    return orchestrator.run_job(shred_job.pk)


def accounted(c: dict) -> bool:
    removed = c["dup_in_batch_natural"] + c["dup_cross_batch_natural"]
    return c["rows_in"] == c["rows_out"] + c["bad_rows"] + removed


# One batch: what it counts and writes is the same whatever keeps the manifest (each kind's
# lookup and record are the cross-batch tests' subject, below). The Parquet manifest's, as
# the cluster tests run it again on each target: its files are Spark's to write there, and
# the demo they also run keeps its manifest in the database.
@pytest.mark.representative
def test_shred_counts_every_row_and_writes_the_tables(pipeline, lake, spark, settings):
    ingest, shred_job = pipeline("parquet")
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
    bad = published(spark, location("events_bad"))
    assert {r["source_file"].rsplit("/", 1)[-1] for r in bad.collect()} <= {
        "part-0001.tsv",
        "part-0002.tsv",
    }
    run_row = InstanceExec.objects.get(process__name="shred_events")
    # The session's application (local-..., app-... on a cluster; with a Connect session's
    # id after it).
    assert run_row.spark_application_id.startswith(spark.conf.get("spark.app.id"))


@pytest.mark.parametrize("manifest", ["database", "parquet"])
def test_a_later_batch_repeating_events_drops_them(pipeline, lake, spark, settings, manifest):
    ingest, shred_job = pipeline(manifest)
    factory = EventFactory(seed=12)
    first_lines, first_events = factory.batch(100)
    land(lake, "a.tsv", first_lines)
    first = run(ingest, shred_job)
    assert shred_counters(shred_job)["rows_out"] == 100
    lines, _ = factory.batch(50, repeat_from=first_events, repeat=0.2)
    land(lake, "b.tsv", lines)
    second = run(ingest, shred_job)
    c = shred_counters(shred_job)
    assert c["dup_cross_batch_natural"] == 10  # the repeats of batch one, and only them
    assert c["rows_out"] == 50
    assert accounted(c)
    assert_unique_ids(spark, settings)
    assert atomic_rows(spark, settings, second.target_batch_id).count() == 50
    assert atomic_rows(spark, settings, first.target_batch_id).count() == 100


BROKEN: list[bool] = []


def broken_while_flagged(context):
    if BROKEN:
        raise RuntimeError("the step after the shred broke")
    return {}


def lake_tables(spark, settings, batch_ids: list[int]) -> dict[str, DataFrame]:
    """What the shred wrote for ``batch_ids``: the atomic events, the bad rows, every entity
    table's rows (one frame) and the bad entities, without their batch column."""

    def read(table):
        df = published(spark, location(table))
        return df.filter(df.batch_id.isin(batch_ids)).drop("batch_id")

    special = {"events", "events_bad", "events_bad_entities", "after"}
    entity_tables = sorted(
        set(HiveTable.objects.filter(dbname="lake").values_list("table_name", flat=True)) - special
    )
    entities = read(entity_tables[0])
    for table in entity_tables[1:]:
        entities = entities.unionByName(read(table))
    return {
        "events": read("events"),
        "bad": read("events_bad"),
        "entities": entities,
        "bad_entities": read("events_bad_entities"),
    }


def clean_run(spark, files: list[Path], manifest: str) -> dict[str, DataFrame]:
    """The same files shredded once each, in order, by the shred itself, with a manifest
    no attempt has touched: what exactly-once means."""
    kept = {"events": [], "bad": [], "entities": [], "bad_entities": []}
    backend = open_manifest(manifest, spark, "clean", 180)
    for run_id, path in enumerate(files, start=1_000):
        raw = spark.read.text(str(path)).select("value", F.input_file_name().alias("source_file"))
        done = shred_and_dedupe(
            raw, run_id=run_id, manifest=backend, enabled=dict.fromkeys(STRATEGIES, True)
        )
        parsed = shred.all_entities(done.events)
        kept["events"] += shred.atomic(done.events).collect()
        kept["bad"] += done.bad.collect()
        kept["entities"] += shred.entities(parsed).collect()
        kept["bad_entities"] += shred.bad_entities(parsed).collect()
    return kept


@pytest.mark.parametrize("manifest", ["database", "parquet"])
def test_retries_and_a_requeued_dead_letter_give_exactly_the_output_of_one_clean_run(
    pipeline, lake, spark, settings, manifest
):
    ingest, shred_job = pipeline(manifest, max_retries=2, shred_can_recover=False)
    Property.objects.create(
        process=shred_job.steps.get(name="after"),
        config_group="callable",
        key="path",
        value="tests.processes.step_kinds.test_spark_shred.broken_while_flagged",
    )
    factory = EventFactory(seed=21)
    a_lines, a_events = factory.batch(
        60, natural=0.1, synthetic=0.1, malformed=0.05, null_fingerprint=0.1
    )
    a_lines += [a_lines[0], line_of(factory.event() | {"contexts": "{not json"})]
    b_lines, _ = factory.batch(40, repeat_from=a_events, repeat=0.25, synthetic=0.1)
    b_lines.append(line_of(factory.event(event_id=a_events[1]["event_id"])))
    land(lake, "a.tsv", a_lines)

    # a: the shred writes its output and its manifest, then the next step fails; the retry
    # shreds it again and fails again: a dead letter.
    BROKEN[:] = [True]
    failed = run(ingest, shred_job)
    assert not failed.succeeded
    retried = orchestrator.run_job(shred_job.pk)
    assert not retried.succeeded and retried.target_batch_id == failed.target_batch_id
    (dead,) = BatchConsumpQueue.objects.filter(process__name="shred_events")
    assert dead.batch_state_id == BatchState.DISCARDED
    # b comes and is delivered meanwhile.
    BROKEN.clear()
    land(lake, "b.tsv", b_lines)
    delivered = run(ingest, shred_job)
    assert delivered.succeeded
    # The dead letter is requeued and its batch rebuilt.
    queue.requeue(dead.pk)
    rebuilt = orchestrator.run_job(shred_job.pk)
    assert rebuilt.succeeded and rebuilt.target_batch_id == failed.target_batch_id
    assert shred_counters(shred_job)["rows_out"] > 0

    written = lake_tables(spark, settings, [failed.target_batch_id, delivered.target_batch_id])
    expected = clean_run(spark, [lake / "a.tsv", lake / "b.tsv"], manifest)
    for name, rows in expected.items():
        assert rows, f"the clean run wrote no {name}: the scenario would prove nothing"
        assertDataFrameEqual(written[name], rows)
    assert_unique_ids(spark, settings)


def assert_unique_ids(spark, settings) -> None:
    """After a shred with every strategy on, an event id names exactly one event."""
    events = published(spark, location("events"))
    assert events.count() == events.select("event_id").distinct().count()


# The synthetic decision is made on what the manifest found (each kind's finding is
# test_a_later_batch_repeating_events_drops_them's subject): one kind is enough.
def test_cross_batch_synthetic_gets_a_new_id_and_the_duplicate_context(
    pipeline, lake, spark, settings
):
    ingest, shred_job = pipeline("database")
    factory = EventFactory(seed=13)
    first_lines, first_events = factory.batch(20)
    land(lake, "a.tsv", first_lines)
    run(ingest, shred_job)
    reused = first_events[0]["event_id"]
    from tests.helpers.enriched import line_of

    land(lake, "b.tsv", [line_of(factory.event(event_id=reused))])
    second = run(ingest, shred_job)
    c = shred_counters(shred_job)
    assert (c["dup_cross_batch_synthetic"], c["dup_cross_batch_natural"]) == (1, 0)
    (row,) = atomic_rows(spark, settings, second.target_batch_id).collect()
    assert row["event_id"] != reused
    duplicate = published(spark, location("com_snowplowanalytics_snowplow_duplicate_1")).filter(
        f"batch_id = {second.target_batch_id}"
    )
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


def test_an_expired_parquet_manifest_partition_is_pruned(team, pipeline, lake, spark, settings):
    ingest, shred_job = pipeline("parquet", ttl_days=1)
    factory = EventFactory(seed=15)
    lines, _ = factory.batch(10)
    land(lake, "a.tsv", lines)
    run(ingest, shred_job)
    root = settings.BDRE_WAREHOUSE / f"team-{team.group.pk}" / "manifests" / "default"
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
    bad = published(spark, location("events_bad_entities"))
    (row,) = bad.collect()
    assert (row["root_id"], row["source_column"], row["json"]) == (
        broken["event_id"],
        "contexts",
        "{not json",
    )
    # Where it came from, like a bad row.
    assert row["source_file"] == (lake / "part-0001.tsv").as_uri()
    assert row["line"] == line_of(broken)
    assert row["reason"].startswith("contexts is not a JSON object")
    assert HiveTable.objects.filter(dbname="lake", table_name="events_bad_entities").exists()


def page_context(version: str, category: str) -> str:
    return json.dumps(
        {
            "schema": CONTEXTS_SCHEMA,
            "data": [
                {"schema": f"iglu:com.acme/page/jsonschema/{version}", "data": {"c": category}}
            ],
        }
    )


def test_two_versions_of_one_model_land_in_its_table_and_a_new_model_in_another(
    pipeline, lake, spark, settings
):
    ingest, shred_job = pipeline("none")
    factory = EventFactory(seed=31)
    events = [
        factory.event(kind="page_view") | {"contexts": page_context(version, f"c{i}")}
        for i, version in enumerate(["1-0-0", "1-0-1", "1-0-0", "2-0-0"])
    ]
    land(lake, "a.tsv", [line_of(e) for e in events])
    outcome = run(ingest, shred_job)
    assert outcome.succeeded, outcome.error
    page = published(spark, location("com_acme_page_1"))
    assertDataFrameEqual(
        page.select("root_id", "schema_version", "data"),
        [
            (events[i]["event_id"], v, f'{{"c":"c{i}"}}')
            for i, v in enumerate(["1-0-0", "1-0-1", "1-0-0"])
        ],
    )
    page_2 = published(spark, location("com_acme_page_2"))
    assert [(r["root_id"], r["schema_version"]) for r in page_2.collect()] == [
        (events[3]["event_id"], "2-0-0")
    ]


def test_versions_of_one_model_in_two_batches_keep_both_batches(pipeline, lake, spark, settings):
    ingest, shred_job = pipeline("none")
    factory = EventFactory(seed=32)
    old = factory.event(kind="page_view") | {"contexts": page_context("1-0-0", "old")}
    new = factory.event(kind="page_view") | {"contexts": page_context("1-0-1", "new")}
    land(lake, "a.tsv", [line_of(old)])
    first = run(ingest, shred_job)
    land(lake, "b.tsv", [line_of(new)])
    second = run(ingest, shred_job)
    page = published(spark, location("com_acme_page_1"))
    assertDataFrameEqual(
        page.select("root_id", "schema_version", "batch_id"),
        [
            (old["event_id"], "1-0-0", first.target_batch_id),
            (new["event_id"], "1-0-1", second.target_batch_id),
        ],
    )


def test_a_clean_batch_leaves_readable_tables_for_the_next_sql_step(team, lake, spark, settings):
    ingest, shred_job = shred_pipeline(
        team.application,
        lake,
        manifest="none",
        sql="SELECT e.event_id, count(b.line) AS bad FROM lake.events e "
        "LEFT JOIN lake.events_bad b ON b.batch_id = e.batch_id "
        "WHERE e.batch_id IN ({batch_ids}) GROUP BY e.event_id",
    )
    lines, events = EventFactory(seed=33).batch(5)
    land(lake, "a.tsv", lines)
    outcome = run(ingest, shred_job)
    assert outcome.succeeded, outcome.error
    for table in ("events_bad", "events_bad_entities"):
        empty = published(spark, location(table))
        assert empty.count() == 0 and "reason" in empty.columns
    after = published(spark, location("after"))
    assert sorted((r["event_id"], r["bad"]) for r in after.collect()) == sorted(
        (e["event_id"], 0) for e in events
    )


@pytest.mark.parametrize("manifest", ["database", "parquet"])
def test_two_teams_with_one_manifest_name_never_drop_each_others_events(
    team, lake, spark, settings, manifest
):
    lines, _ = EventFactory(seed=34).batch(20)
    theirs = lake.parent / "their-landing"
    theirs.mkdir()
    ours = shred_pipeline(team.application, lake, manifest=manifest)
    other = shred_pipeline(team.other_application, theirs, manifest=manifest, prefix="their_")
    land(lake, "a.tsv", lines)
    land(theirs, "a.tsv", lines)  # the very same events, in the other team
    run(*ours)
    run(*other)
    assert shred_counters(other[1])["dup_cross_batch_natural"] == 0
    assert shred_counters(other[1])["rows_out"] == 20


def test_a_manifest_name_that_is_a_path_is_refused_when_the_step_runs(team, lake, spark, settings):
    ingest, shred_job = shred_pipeline(team.application, lake, manifest="parquet")
    # Changed behind the registry's back (which refuses it: test_shred_checks.py).
    Property.objects.create(
        process=shred_job.steps.get(name="shred_events"),
        config_group="dedup",
        key="manifest_name",
        value="../../team-1/manifests/x",
    )
    land(lake, "a.tsv", EventFactory(seed=35).batch(3)[0])
    outcome = run(ingest, shred_job)
    assert not outcome.succeeded and "dedup.manifest_name must be" in outcome.error
