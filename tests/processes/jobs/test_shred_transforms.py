"""The shred transforms on tiny in-memory frames, with exact expected output."""

from __future__ import annotations

import json

from pyspark.testing import assertDataFrameEqual

from processes.jobs import shred
from processes.jobs.enriched_fields import FIELDS
from tests.data.enriched import EventFactory, line_of


def raw(spark, lines: list[str], source: str = "file:///landing/a.tsv"):
    return spark.createDataFrame(
        [(line, source) for line in lines], "value string, source_file string"
    )


def event(event_id: str, fingerprint: str | None, etl: str = "2026-11-20 09:00:00.000", **extra):
    values = {
        "event_id": event_id,
        "etl_tstamp": etl,
        "collector_tstamp": "2026-11-20 08:00:00.000",
    }
    if fingerprint is not None:
        values["event_fingerprint"] = fingerprint
    values.update(extra)
    return line_of(values)


def ids(df) -> list[tuple]:
    return sorted(
        (r["event_id"], r["event_fingerprint"], r["etl_tstamp"])
        for r in df.select("event_id", "event_fingerprint", "etl_tstamp").collect()
    )


def test_lines_split_exactly_on_tabs_and_bad_lines_keep_their_reason(spark):
    good = event("e1", "f1", page_title='say "hi", "there"')
    short = "\t".join(good.split("\t")[:40])
    long = good + "\textra"
    no_id = event("", "f2")
    events, bad = shred.parse(raw(spark, [good, short, long, no_id]))
    (row,) = events.collect()
    assert row["event_id"] == "e1"
    assert row["page_title"] == 'say "hi", "there"'
    assert row["app_id"] is None  # empty fields are NULL
    assert len([c for c in events.columns if c in FIELDS]) == 131
    assertDataFrameEqual(
        bad,
        [
            (short, "file:///landing/a.tsv", "expected 131 tab-separated fields, found 40"),
            (long, "file:///landing/a.tsv", "expected 131 tab-separated fields, found 132"),
            (no_id, "file:///landing/a.tsv", "event_id is empty"),
        ],
    )


def test_in_batch_natural_keeps_the_earliest_copy_and_never_merges_null_fingerprints(spark):
    lines = [
        event("e1", "f1", "2026-11-20 09:00:02.000"),
        event("e1", "f1", "2026-11-20 09:00:01.000"),
        event("e1", "f1", "2026-11-20 09:00:03.000"),
        event("e2", None, "2026-11-20 09:00:01.000"),
        event("e2", None, "2026-11-20 09:00:01.000"),
        event("e3", "f3"),
    ]
    events, _ = shred.parse(raw(spark, lines))
    kept = shred.dedupe_in_batch_natural(events)
    assert ids(kept) == [
        ("e1", "f1", "2026-11-20 09:00:01.000"),
        ("e2", None, "2026-11-20 09:00:01.000"),
        ("e2", None, "2026-11-20 09:00:01.000"),
        ("e3", "f3", "2026-11-20 09:00:00.000"),
    ]


def test_the_surviving_copy_is_the_same_whatever_the_input_order(spark):
    a = event("e1", "f1", "2026-11-20 09:00:01.000", page_url="https://a")
    b = event("e1", "f1", "2026-11-20 09:00:01.000", page_url="https://b")
    for lines in ([a, b], [b, a]):
        events, _ = shred.parse(raw(spark, lines))
        (row,) = shred.dedupe_in_batch_natural(events).collect()
        assert row["page_url"] == "https://a"


def test_cross_batch_natural_drops_pairs_seen_in_other_runs(spark):
    events, _ = shred.parse(raw(spark, [event("e1", "f1"), event("e2", "f2"), event("e3", None)]))
    seen = spark.createDataFrame(
        [("e1", "f1"), ("e2", "other"), ("e3", None)], "event_id string, event_fingerprint string"
    )
    kept = shred.drop_seen_in_other_runs(events, seen)
    assert sorted(r["event_id"] for r in kept.collect()) == ["e2", "e3"]


def test_synthetic_duplicates_get_deterministic_new_ids_and_a_duplicate_context(spark):
    events, _ = shred.parse(
        raw(spark, [event("e1", "fa"), event("e1", "fb"), event("e2", "f2"), event("e3", "f3")])
    )
    seen_ids = spark.createDataFrame([("e3",)], "event_id string")
    flagged = shred.flag_synthetic(events, seen_ids)
    rewritten = shred.rewrite_synthetic(flagged, run_id=42).cache()
    rows = {r["event_fingerprint"]: r for r in rewritten.collect()}
    assert rows["f2"]["event_id"] == "e2"
    assert rows["f2"]["derived_contexts"] is None
    new_ids = {rows[f]["event_id"] for f in ("fa", "fb", "f3")}
    assert len(new_ids) == 3 and not new_ids & {"e1", "e3"}
    assert all(len(i) == 36 and i.count("-") == 4 for i in new_ids)
    context = json.loads(rows["fa"]["derived_contexts"])
    assert context["data"] == [
        {
            "schema": "iglu:com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0",
            "data": {"originalEventId": "e1"},
        }
    ]
    assert (rows["fa"]["_synthetic_in_batch"], rows["fa"]["_synthetic_cross_batch"]) == (
        True,
        False,
    )
    assert (rows["f3"]["_synthetic_in_batch"], rows["f3"]["_synthetic_cross_batch"]) == (
        False,
        True,
    )
    again = shred.rewrite_synthetic(shred.flag_synthetic(events, seen_ids), run_id=42)
    assert {r["event_id"] for r in again.collect()} == {r["event_id"] for r in rows.values()}
    other_run = shred.rewrite_synthetic(shred.flag_synthetic(events, seen_ids), run_id=43)
    assert {r["event_id"] for r in other_run.collect()} != {r["event_id"] for r in rows.values()}


def test_a_duplicate_context_is_appended_to_existing_derived_contexts(spark):
    derived = json.dumps(
        {
            "schema": shred.CONTEXTS_SCHEMA,
            "data": [{"schema": "iglu:a/b/jsonschema/1-0-0", "data": {}}],
        }
    )
    empty = json.dumps({"schema": shred.CONTEXTS_SCHEMA, "data": []})
    events, _ = shred.parse(
        raw(
            spark,
            [
                event("e1", "fa", derived_contexts=derived),
                event("e1", "fb", derived_contexts=empty),
            ],
        )
    )
    none_seen = spark.createDataFrame([], "event_id string")
    rows = shred.rewrite_synthetic(shred.flag_synthetic(events, none_seen), 1).collect()
    by_fp = {r["event_fingerprint"]: json.loads(r["derived_contexts"]) for r in rows}
    assert [c["schema"] for c in by_fp["fa"]["data"]] == [
        "iglu:a/b/jsonschema/1-0-0",
        shred.DUPLICATE_SCHEMA,
    ]
    assert [c["schema"] for c in by_fp["fb"]["data"]] == [shred.DUPLICATE_SCHEMA]


def test_entities_carry_schema_and_hierarchy(spark):
    factory = EventFactory(seed=3)
    values = factory.event(kind="unstruct")
    events, _ = shred.parse(raw(spark, [line_of(values)]))
    rows = shred.entities(events).collect()
    by_name = {r["schema_name"]: r for r in rows}
    assert {"page", "ua_parser_context", "link_click"} <= set(by_name)
    link = by_name["link_click"]
    assert (link["schema_vendor"], link["schema_format"], link["schema_version"]) == (
        "com.snowplowanalytics.snowplow",
        "jsonschema",
        "1-0-1",
    )
    assert link["root_id"] == values["event_id"]
    assert link["root_tstamp"] == values["collector_tstamp"]
    assert (link["ref_root"], link["ref_tree"], link["ref_parent"]) == (
        "events",
        "events.link_click",
        "events",
    )
    assert json.loads(link["data"]) == {"targetUrl": "https://x.example"}
    assert shred.table_name("com.acme", "page", "1-0-0") == "com_acme_page_1"


def test_atomic_events_have_no_json_fields(spark):
    events, _ = shred.parse(raw(spark, [event("e1", "f1")]))
    columns = shred.atomic(events).columns
    assert len(columns) == 128
    assert not {"contexts", "unstruct_event", "derived_contexts"} & set(columns)


def test_generator_lines_parse(spark):
    lines, unique = EventFactory(seed=5).batch(50, natural=0.1, synthetic=0.1, malformed=0.1)
    events, bad = shred.parse(raw(spark, lines))
    assert events.count() == 60
    assert bad.count() == 5
    assert len(unique) == 50
