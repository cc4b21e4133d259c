"""The shred transforms on tiny in-memory frames, with exact expected output."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from processes.step_kinds import shred
from processes.step_kinds.enriched_fields import FIELDS
from processes.step_kinds.shred_runner import STRATEGIES, shred_and_dedupe
from tests.helpers.enriched import EventFactory, line_of


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


def test_keying_splits_each_line_once(spark, tmp_path):
    """Each field taken from an inline split made the split again: 14 s instead of 3 s on 1
    million lines. The plan must hold one split."""
    # Read from a file, as the step reads: a frame of local rows (as a Spark Connect
    # session makes it) is computed whole by the optimizer, and its plan holds no split.
    path = tmp_path / "a.tsv"
    path.write_text(event("e1", "f1") + "\n")
    lines = spark.read.text(str(path)).select("value", F.input_file_name().alias("source_file"))
    keyed = shred.keyed_lines(lines)
    # The physical plan, as explain() prints it (through the public API, which a Spark
    # Connect session has too).
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        keyed.explain()
    plan = printed.getvalue()
    assert plan.count("split(") == 1


def test_keyed_lines_take_the_keys_of_whole_lines_only(spark):
    good = event("e1", "f1", "2026-11-20 09:00:01.000")
    short = "\t".join(good.split("\t")[:40])
    rows = shred.keyed_lines(raw(spark, [good, short])).orderBy(shred.ROW).collect()
    assert [(r["_good"], r["_n"], r["event_id"], r["event_fingerprint"]) for r in rows] == [
        (True, 131, "e1", "f1"),
        (False, 40, None, None),
    ]
    assert rows[0]["etl_tstamp"] == "2026-11-20 09:00:01.000"
    assert (rows[0]["value"], rows[1]["value"]) == (None, short)  # only bad lines keep it


def test_a_run_caches_uncompressed_and_puts_the_setting_back(spark):
    key = "spark.sql.inMemoryColumnarStorage.compressed"
    seen = []

    class Watching(FixedManifest):
        def check_and_record(self, pairs, run_id, now):
            seen.append(spark.conf.get(key))
            return super().check_and_record(pairs, run_id, now)

    before = spark.conf.get(key)
    enabled = dict.fromkeys(STRATEGIES, True)
    manifest = Watching(spark, [])
    shred_and_dedupe(raw(spark, [event("e1", "f1")]), run_id=1, manifest=manifest, enabled=enabled)
    assert seen == ["false"]
    assert spark.conf.get(key) == before


def test_a_failing_run_puts_the_cache_setting_back(spark):
    key = "spark.sql.inMemoryColumnarStorage.compressed"
    before = spark.conf.get(key)

    class Broken(FixedManifest):
        def check_and_record(self, pairs, run_id, now):
            raise RuntimeError("manifest unreachable")

    enabled = dict.fromkeys(STRATEGIES, True)
    with pytest.raises(RuntimeError, match="manifest unreachable"):
        shred_and_dedupe(
            raw(spark, [event("e1", "f1")]), run_id=1, manifest=Broken(spark, []), enabled=enabled
        )
    assert spark.conf.get(key) == before


class FixedManifest:
    """A manifest whose other runs saw exactly ``pairs``; records nothing."""

    def __init__(self, spark, pairs: list[tuple[str, str | None]]):
        frame = spark.createDataFrame(pairs, "event_id string, event_fingerprint string")
        self.seen = frame.select(
            *shred.hashes_of(frame.event_id, frame.event_fingerprint), F.lit(True).alias("earlier")
        )
        self.recorded = None

    def check_and_record(self, pairs, run_id, now):
        self.recorded = sorted(tuple(r) for r in pairs.select(*shred.KEYS).collect())
        return self.seen


def dedupe(spark, lines, *, seen=(), run_id=1, only=None):
    """Shred and deduplicate ``lines`` against a manifest holding ``seen``, with only the
    strategies named in ``only`` (all by default)."""
    enabled = {s: only is None or s in only for s in STRATEGIES}
    return shred_and_dedupe(
        raw(spark, lines), run_id=run_id, manifest=FixedManifest(spark, list(seen)), enabled=enabled
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
    done = dedupe(spark, lines, only={"in_batch_natural"})
    assert ids(done.events) == [
        ("e1", "f1", "2026-11-20 09:00:01.000"),
        ("e2", None, "2026-11-20 09:00:01.000"),
        ("e2", None, "2026-11-20 09:00:01.000"),
        ("e3", "f3", "2026-11-20 09:00:00.000"),
    ]
    assert done.counters["dup_in_batch_natural"] == 2
    assert done.counters["rows_out"] == 4


def test_natural_losers_are_the_later_copies(spark):
    lines = [
        event("e1", "f1", "2026-11-20 09:00:02.000"),
        event("e1", "f1", "2026-11-20 09:00:01.000"),
        event("e2", "f2"),
    ]
    keyed = shred.keyed_lines(raw(spark, lines)).cache()
    losers = shred.in_batch_natural_losers(shred.good_lines(keyed))
    (loser,) = keyed.join(losers, shred.ROW, "left_semi").collect()
    assert loser["etl_tstamp"] == "2026-11-20 09:00:02.000"


def test_the_surviving_copy_is_the_same_whatever_the_input_order(spark):
    copies = [event("e1", "f1", "2026-11-20 09:00:01.000", page_url=f"https://{c}") for c in "abcd"]
    survivors = {
        dedupe(spark, order).events.collect()[0]["page_url"]
        for order in (copies, copies[::-1], copies[1:] + copies[:1], copies[2:] + copies[:2])
    }
    assert len(survivors) == 1


def test_cross_batch_natural_drops_pairs_seen_in_other_runs(spark):
    lines = [event("e1", "f1"), event("e2", "f2"), event("e3", None)]
    seen = [("e1", "f1"), ("e2", "other"), ("e3", None)]
    done = dedupe(spark, lines, seen=seen, only={"cross_batch_natural"})
    assert sorted(r["event_id"] for r in done.events.collect()) == ["e2", "e3"]
    assert done.counters["dup_cross_batch_natural"] == 1


def test_an_event_without_fingerprint_repeated_from_another_run_is_renamed_not_dropped(spark):
    lines = [event("e1", None), event("e2", "f2")]
    seen = [("e1", shred.NO_FINGERPRINT), ("e2", shred.NO_FINGERPRINT)]
    done = dedupe(spark, lines, seen=seen)
    kept = sorted(r[shred.ORIGINAL_ID] for r in done.events.collect())
    assert kept == ["e1", "e2"]  # never a natural duplicate
    assert "e1" not in {r["event_id"] for r in done.events.collect()}
    assert done.counters["dup_cross_batch_synthetic"] == 2


def test_the_manifest_gets_the_pairs_left_after_in_batch_deduplication(spark):
    lines = [event("e1", "f1"), event("e1", "f1", "2026-11-20 10:00:00.000"), event("e2", None)]
    manifest = FixedManifest(spark, [])
    enabled = dict.fromkeys(STRATEGIES, True)
    shred_and_dedupe(raw(spark, lines), run_id=1, manifest=manifest, enabled=enabled)
    assert manifest.recorded == [("e1", "f1"), ("e2", shred.NO_FINGERPRINT)]


def test_synthetic_duplicates_get_deterministic_new_ids_and_a_duplicate_context(spark):
    lines = [event("e1", "fa"), event("e1", "fb"), event("e2", "f2"), event("e3", "f3")]
    seen = [("e3", "older")]
    done = dedupe(spark, lines, seen=seen, run_id=42)
    rows = {r["event_fingerprint"]: r for r in done.events.collect()}
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
    assert rows["fa"][shred.ORIGINAL_ID] == "e1"
    assert (rows["fa"]["_synthetic_in_batch"], rows["fa"]["_synthetic_cross_batch"]) == (
        True,
        False,
    )
    assert (rows["f3"]["_synthetic_in_batch"], rows["f3"]["_synthetic_cross_batch"]) == (
        False,
        True,
    )
    assert done.counters["dup_in_batch_synthetic"] == 2
    assert done.counters["dup_cross_batch_synthetic"] == 1
    assert done.counters["rows_out"] == 4
    again = dedupe(spark, list(reversed(lines)), seen=seen, run_id=42).events
    assert {r["event_id"] for r in again.collect()} == {r["event_id"] for r in rows.values()}
    # A retry, a requeue or a replay of the same input runs under another run: same ids.
    other_run = dedupe(spark, lines, seen=seen, run_id=43).events
    assert {r["event_id"] for r in other_run.collect()} == {r["event_id"] for r in rows.values()}


def test_byte_identical_lines_without_a_fingerprint_each_get_their_own_id(spark):
    twin = event("e1", None)
    lines = [twin, event("e2", "f2"), twin, twin]
    done = dedupe(spark, lines)
    kept = [r["event_id"] for r in done.events.collect()]
    assert len(kept) == 4 and len(set(kept)) == 4  # every kept event id names one event
    assert "e1" not in kept and "e2" in kept
    assert done.counters["dup_in_batch_synthetic"] == 3
    # The same lines again, in another order: the same three ids.
    again = dedupe(spark, [twin, twin, event("e2", "f2"), twin], run_id=7)
    assert sorted(r["event_id"] for r in again.events.collect()) == sorted(kept)
    # The same line in another file is another event.
    elsewhere = shred_and_dedupe(
        raw(spark, [twin], source="file:///landing/b.tsv").unionByName(raw(spark, [twin])),
        run_id=1,
        manifest=None,
        enabled=dict.fromkeys(STRATEGIES, True),
    )
    assert len({r["event_id"] for r in elsewhere.events.collect()}) == 2


def test_switched_off_synthetic_strategies_keep_the_ids(spark):
    lines = [event("e1", "fa"), event("e1", "fb"), event("e3", "f3")]
    done = dedupe(spark, lines, seen=[("e3", "older")], only={"in_batch_natural"})
    assert sorted(r["event_id"] for r in done.events.collect()) == ["e1", "e1", "e3"]
    assert done.counters["dup_in_batch_synthetic"] == 0
    assert done.counters["dup_cross_batch_synthetic"] == 0


def test_a_duplicate_context_is_appended_to_existing_derived_contexts(spark):
    derived = json.dumps(
        {
            "schema": shred.CONTEXTS_SCHEMA,
            "data": [{"schema": "iglu:a/b/jsonschema/1-0-0", "data": {}}],
        }
    )
    empty = json.dumps({"schema": shred.CONTEXTS_SCHEMA, "data": []})
    lines = [event("e1", "fa", derived_contexts=derived), event("e1", "fb", derived_contexts=empty)]
    rows = dedupe(spark, lines).events.collect()
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
    rows = shred.entities(shred.all_entities(events)).collect()
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


def test_entities_keep_their_data_as_json_text_and_unreadable_ones_their_reason(spark):
    ctx = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-1"
    a, b = "iglu:com.acme/a/jsonschema/1-0-0", "iglu:com.acme/b/jsonschema/2-0-1"
    contexts = {
        "schema": ctx,
        "data": [
            {"schema": a, "data": {"x": [1, {"y": "z"}]}},
            {"schema": b, "data": 7},
            {"schema": "com.acme/c", "data": {}},
        ],
    }
    lines = [
        event(
            "e1",
            "f1",
            contexts=json.dumps(contexts),
            derived_contexts=json.dumps({"schema": ctx, "data": []}),
        ),
        event("e2", "f2", contexts="{not json", unstruct_event='{"data": "no entity"}'),
    ]
    events, _ = shred.parse(raw(spark, lines))
    parsed = shred.all_entities(events)
    assertDataFrameEqual(
        shred.entities(parsed).select("root_id", "schema_name", "schema_version", "data"),
        [("e1", "a", "1-0-0", '{"x":[1,{"y":"z"}]}'), ("e1", "b", "2-0-1", "7")],
    )
    source = "file:///landing/a.tsv"
    assertDataFrameEqual(
        shred.bad_entities(parsed),
        [
            (
                "e1",
                "contexts",
                json.dumps(contexts),
                "an entity of contexts has no Iglu schema (iglu:vendor/name/format/m-r-a), "
                "found com.acme/c",
                source,
                lines[0],
            ),
            (
                "e2",
                "contexts",
                "{not json",
                "contexts is not a JSON object with a data field of self-describing JSONs",
                source,
                lines[1],
            ),
            (
                "e2",
                "unstruct_event",
                '{"data": "no entity"}',
                "unstruct_event is not a JSON object with a data field of self-describing JSONs",
                source,
                lines[1],
            ),
        ],
    )


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
