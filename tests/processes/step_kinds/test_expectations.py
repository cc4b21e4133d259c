"""Expectations on what a Spark step writes (processes/step_kinds/expectations.py): what
registration refuses, then rules checked on a batch as a step writes it: counted (warn),
taken out to the quarantine table (drop), or failing the step so that its batch is never
published (fail), with the results kept on the run."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError

from batches import partitions
from batches.models import HiveTable, Partition
from lineage.models import LineageRelation
from processes import orchestrator, replay
from processes.models import InstanceExec, Property
from processes.step_kinds import expectations
from tests.helpers.factories import grant_root
from tests.helpers.jobs import (
    build_job,
    callable_step,
    cleanse_step,
    load_step,
    scan_step,
    sql_step,
)
from tests.helpers.spark import published

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("totals", "drop: amount > 0", "name a rule <table>.<rule>"),
        ("totals.positive", "amount > 0", "write <action>: <rule>"),
        ("totals.positive", "skip: amount > 0", "the action one of warn, drop, fail"),
        ("totals.one_a_day", "drop: unique(day)", "its action is warn or fail"),
        ("totals.sized", "fail: rows(10, 2)", "the minimum is above the maximum"),
        ("totals.sized", "fail: rows(ten)", "a batch rule is unique(<column>, ...)"),
        ("totals.positive", "drop: amount > (SELECT max(x) FROM t)", "no query, aggregate"),
        ("totals.positive", "drop: count(*) > 0", "no query, aggregate or window"),
        ("totals.positive", "drop: reflect('java.lang.Runtime', 'exec', 'id')", "reflect"),
        ("totals.positive", "drop: amount > 0) OR (1 = 1", "cannot be parsed"),
        ("totals.recent", "warn: freshness(at) <= soon", "freshness(<column>) <= <age"),
        ("totals.steady", "warn: volume(0, 2)", "the last 1 to 1000 batches"),
        ("totals.steady", "fail: volume(10, 0.5)", "within a factor of 1 or more"),
        ("totals.adds_up", "drop: accounting()", "its action is warn or fail"),
        ("totals.adds_up", "fail: accounting()", "accounting() checks a step that counts"),
        ("totals.recent", "drop: at <= current_timestamp()", "no current_timestamp;"),
        ("totals.coin", "warn: rand() > 0.5 OR uuid() = id", "no rand, uuid;"),
    ],
)
def test_a_bad_rule_is_refused_at_registration_with_what_to_write(team, key, value, says):
    with pytest.raises(ValidationError) as refused:
        build_job(team, "report", [sql_step("report_sql", "SELECT 1 AS a", expect={key: value})])
    assert says in str(refused.value), str(refused.value)


def test_an_expectation_on_a_step_that_writes_no_table_is_refused(team):
    step = callable_step("notify_0", "tests.processes.callables.log_a_line")
    step = dataclasses.replace(step, properties={**step.properties, "expect": {"t.r": "warn: a"}})
    with pytest.raises(ValidationError, match="checked on the tables a Spark step writes"):
        build_job(team, "notify", [step])


def test_rules_parse_into_row_and_batch_rules():
    rules = expectations.rules_of(
        {
            "totals.positive": "drop: amount >= 0 AND email LIKE '%@%'",
            "totals.one_each": "fail: unique(id, day)",
            "totals.sized": "warn: rows(1, *)",
            "totals.emails": "warn: null_ratio(email) <= 0.25",
        }
    )
    assert [(r.name, r.kind, r.action, r.columns) for r in rules] == [
        ("emails", "null_ratio", "warn", ("email",)),
        ("one_each", "unique", "fail", ("id", "day")),
        ("positive", "row", "drop", ("amount", "email")),
        ("sized", "rows", "warn", ()),
    ]
    assert (rules[3].low, rules[3].high) == (1, None)


def measured(batch, rules, history):
    """The rules' results on ``batch``, counted as ``write_batch`` counts them: on the way
    through the pass that writes it (here a collect)."""
    planned = expectations.plan(batch, rules)
    planned.kept.collect()
    return expectations.measure(planned, planned.kept, others=None, history=history)


def test_the_rules_of_a_whole_batch_say_what_they_saw(spark):
    now = datetime.now(UTC)
    batch = spark.createDataFrame(
        [(1, None, now - timedelta(hours=3)), (2, "b@x", now - timedelta(hours=1))],
        "id int, email string, at timestamp",
    )
    rules = expectations.rules_of(
        {
            "t.sized": "warn: rows(3, *)",
            "t.emails": "warn: null_ratio(email) <= 0.5",
            "t.recent": "fail: freshness(at) <= 2h",
            "t.stale": "warn: freshness(at) <= 30m",
            "t.steady": "warn: volume(3, 2)",
            "t.jump": "warn: volume(2, 1.5)",
        }
    )
    seen = {}
    checked = measured(batch, rules, lambda rule: seen.get(rule.name, [4, 3, 1]))
    results = {r["rule"]: (r["passed"], r["failed"], r["observed"]) for r in checked.results}
    assert results == {
        "sized": (0, 2, "2 rows"),
        "emails": (2, 0, "1 of 2 rows NULL (50.0%)"),
        "recent": (2, 0, "the newest at is 1.0h old"),
        "stale": (0, 2, "the newest at is 1.0h old"),
        "steady": (2, 0, "2 rows; the median of the last 3 batches: 3"),
        "jump": (0, 2, "2 rows; the median of the last 2 batches: 3.5"),
    }
    assert checked.failed == []  # the fail rule held
    # An empty batch fails a minimum all the same, with no row to count.
    empty = measured(batch.limit(0), rules[3:4], lambda rule: [])
    assert [(r["rule"], r["ok"], r["failed"]) for r in empty.results] == [("sized", False, 0)]
    seen["steady"] = []
    steady = [r for r in rules if r.name == "steady"]
    again = measured(batch, steady, lambda rule: seen[rule.name])
    assert again.results[0]["observed"] == "no earlier batch to compare with"


# --- in Spark, through a step's run ----------------------------------------------------------


@pytest.fixture
def orders(tmp_path, settings, spark, team):
    """A landed file of orders (one with no email, one with a negative amount, id 3 twice),
    to scan and load into lake.orders: the ingest and load jobs."""
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing = tmp_path / "landing"
    landing.mkdir()
    grant_root(team.group, landing)
    (landing / "orders.json").write_text(
        '{"id": 1, "email": "a@x", "amount": 5.0}\n'
        '{"id": 2, "email": null, "amount": 7.0}\n'
        '{"id": 3, "email": "c@x", "amount": -1.0}\n'
        '{"id": 3, "email": "d@x", "amount": 2.0}\n'
    )
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    load = build_job(
        team, "load", [load_step("load_0", "lake.orders", format="json", upstream=[ingest])]
    )
    return ingest, load


def report_on(team, orders, output: str, expect: dict[str, str]):
    """The orders scanned and loaded, then a run of the job ``report`` selecting them into
    ``output`` with the expectations ``expect``."""
    report = build_job(
        team,
        "report",
        [sql_step("report_sql", QUERY, output=output, upstream=[orders[1]], expect=expect)],
    )
    for job in orders:
        assert orchestrator.run_job(job.pk).succeeded
    return orchestrator.run_job(report.pk)


QUERY = "SELECT id, email, amount FROM lake.orders WHERE batch_id IN ({batch_ids})"


def test_warn_counts_drop_quarantines_and_the_run_keeps_every_result(team, orders, spark):
    run = report_on(
        team,
        orders,
        "lake.clean_orders",
        {
            "clean_orders.positive": "drop: amount >= 0",
            "clean_orders.has_email": "warn: email IS NOT NULL",
            "clean_orders.one_each": "warn: unique(id)",
            "clean_orders.some": "fail: rows(1, *)",
        },
    )
    assert run.succeeded
    kept = published(spark, HiveTable.objects.get(table_name="clean_orders").location)
    assert sorted(r.id for r in kept.collect()) == [1, 2, 3]  # the -1.0 row is out
    quarantined = published(
        spark, HiveTable.objects.get(table_name="clean_orders_quarantine").location
    ).collect()
    step_run = InstanceExec.objects.get(process__name="report_sql")
    assert [(r.id, r.amount, r.failed_rules, r.rule_text, r.run_id) for r in quarantined] == [
        (3, -1.0, "positive", "amount >= 0", step_run.pk)
    ]
    results = {r["rule"]: r for r in step_run.checks}
    assert {k: (r["checked"], r["passed"], r["failed"]) for k, r in results.items()} == {
        "positive": (4, 3, 1),
        "has_email": (4, 3, 1),
        # Rules of the whole batch judge the rows written: the -1.0 row is in no key, no count.
        "one_each": (3, 3, 0),
        "some": (3, 3, 0),
    }
    assert results["positive"]["samples"] == [{"amount": -1.0}]
    assert results["has_email"]["samples"] == [{"email": None}]
    assert results["some"]["action"] == "fail" and results["positive"]["kind"] == "row"
    # The quarantine's lineage: its rows come from where the table's came from.
    held = LineageRelation.objects.get(
        target_node__qualified_name="lake.clean_orders_quarantine.amount", indirect=""
    )
    assert (held.src_node.qualified_name, held.dot_string) == (
        "lake.orders.amount",
        '[label="expect"]',
    )


def test_a_failed_fail_rule_publishes_nothing_and_names_the_rule(team, orders, spark):
    run = report_on(
        team, orders, "lake.unique_orders", {"unique_orders.one_each": "fail: unique(id)"}
    )
    assert not run.succeeded
    step_run = InstanceExec.objects.get(process__name="report_sql")
    assert "batch" in step_run.error and "is not published" in step_run.error
    assert "unique_orders.one_each (unique(id)): 2 of 4 failed" in step_run.error
    assert [(c["failed"], c["samples"]) for c in step_run.checks] == [(2, [{"id": 3}])]
    # Written by the attempt that counted the rules, seen by nobody, removed by the reaper.
    table = HiveTable.objects.get(table_name="unique_orders")
    (attempt,) = Partition.objects.filter(table=table)
    assert attempt.state == Partition.State.WRITTEN and attempt.step_run_id == step_run.pk
    assert published(spark, table.location).count() == 0
    assert partitions.remove_unused() == [attempt.pk]
    assert not Path(attempt.location).exists()


def test_a_quarantine_that_is_not_what_the_write_dropped_fails_the_batch(
    team, orders, spark, monkeypatch
):
    """The quarantine is a second pass over the step's rows: rows that changed between the
    two passes would be lost or doubled, so the batch is not published."""
    real = expectations.quarantine

    def changed(planned, checked, run_id):  # the step's input rewritten meanwhile
        rows = real(planned, checked, run_id)
        return rows.union(rows)

    monkeypatch.setattr(expectations, "quarantine", changed)
    run = report_on(
        team, orders, "lake.clean_orders", {"clean_orders.positive": "drop: amount >= 0"}
    )
    assert not run.succeeded
    assert "lake.clean_orders_quarantine holds 2 rows where the drop rules took 1" in run.error
    for name in ("clean_orders", "clean_orders_quarantine"):
        assert published(spark, HiveTable.objects.get(table_name=name).location).count() == 0


def test_after_a_fixed_rule_a_replayed_batch_publishes_the_rows_its_quarantine_held(
    team, orders, spark
):
    first = report_on(
        team, orders, "lake.clean_orders", {"clean_orders.positive": "drop: amount >= 0"}
    )
    table = HiveTable.objects.get(table_name="clean_orders")
    quarantine = HiveTable.objects.get(table_name="clean_orders_quarantine")

    def ids(of: HiveTable) -> list[int]:
        return sorted(r.id for r in published(spark, of.location).collect())

    assert (ids(table), ids(quarantine)) == ([1, 2, 3], [3])
    # Refunds are orders too: the rule was wrong. Fixed, and the batch replayed, previewed.
    Property.objects.filter(config_group="expect", key="clean_orders.positive").update(
        value="drop: amount >= -5"
    )
    plan = replay.plan_reprocess_batch(first.target_batch_id)
    (rebuilt,) = plan.rebuilds
    assert f"lake.clean_orders_quarantine/batch_id={first.target_batch_id}" in rebuilt.partitions
    replay.put_back(plan)
    again = orchestrator.run_job(first.job_id)
    assert again.succeeded and again.target_batch_id == first.target_batch_id
    assert (ids(table), ids(quarantine)) == ([1, 2, 3, 3], [])
    latest = InstanceExec.objects.filter(process__name="report_sql").order_by("-id").first()
    assert [(c["checked"], c["passed"], c["failed"]) for c in latest.checks] == [(4, 4, 0)]


def test_the_accounting_says_what_each_row_read_became():
    (rule,) = expectations.rules_of({"events.adds_up": "fail: accounting()"})
    counters = {"rows_in": 800, "bad_rows": 80, "dup_in_batch_natural": 200}
    written = {("lake", "events"): 500, ("lake", "events_quarantine"): 20}

    def audit(upstream=None, tables=written, uncounted=None, **changed):
        books = expectations.ledger(
            counters | changed, tables, "Events", upstream, uncounted=uncounted
        )
        result = expectations.audit(rule, books)
        return result["ok"], result["failed"], result["observed"]

    assert audit() == (
        True,
        0,
        "800 read, 800 accounted for: 500 written + 20 quarantined + 80 bad + 200 duplicates",
    )
    ok, failed, observed = audit(upstream=810)
    assert (ok, failed) == (False, 10)
    assert observed.endswith("; 810 published upstream in what it read")
    assert audit(rows_in=803)[:2] == (False, 3)  # three rows neither written nor set aside
    assert audit(rows_in=None) == (False, 0, "cannot be checked: the step counted no rows read")
    # Numbers it cannot compare are said, never taken for zeros.
    in_place = audit(tables={}, uncounted={("lake", "events")})
    assert (
        in_place[2]
        == "cannot be checked: the rows of Events were not counted as written (written in place)"
    )
    twice = audit(tables=written | {("other", "events"): 500})
    assert twice[2] == "cannot be checked: the step wrote 2 tables named Events"


def test_the_accounting_of_a_cleanse_adds_up_and_fails_the_batch_its_input_lost_a_row_of(
    team, orders, spark, tmp_path
):
    """ingest -> load (lake.orders) -> cleanse, its rows read against what the load
    published: every row is written, quarantined or invalid; a row lost from the published
    partition after the load counted it fails the cleanse's batch, which is not published."""
    ingest, load = orders
    fields = [
        {"name": "id", "type": "long", "required": True},
        {"name": "email", "type": "string", "required": True},
        {"name": "amount", "type": "double"},
    ]
    expect = {
        "clean_orders.positive": "drop: amount >= 0",
        "clean_orders.adds_up": "fail: accounting()",
    }
    cleanse = build_job(
        team,
        "cleanse",
        [
            cleanse_step(
                "cleanse_0",
                "lake.orders",
                fields,
                upstream=[load],
                expect=expect,
                clean_table="lake.clean_orders",
                invalid_table="lake.invalid_orders",
            )
        ],
    )
    for job in (ingest, load, cleanse):
        assert orchestrator.run_job(job.pk).succeeded
    step_run = InstanceExec.objects.get(process__name="cleanse_0")
    adds_up = next(c for c in step_run.checks if c["rule"] == "adds_up")
    assert (adds_up["checked"], adds_up["failed"], adds_up["ok"]) == (4, 0, True)
    assert adds_up["observed"] == (
        "4 read, 4 accounted for: 2 written + 1 quarantined + 1 invalid; "
        "4 published upstream in what it read"
    )

    # More orders land and are loaded; then a row of the published partition is lost.
    (tmp_path / "landing" / "orders_2.json").write_text(
        '{"id": 5, "email": "e@x", "amount": 1.0}\n{"id": 6, "email": "f@x", "amount": 3.0}\n'
    )
    assert orchestrator.run_job(ingest.pk).succeeded and orchestrator.run_job(load.pk).succeeded
    loaded = Partition.objects.filter(table__table_name="orders").order_by("-batch_id").first()
    assert loaded.rows == 2 and loaded.state == Partition.State.PUBLISHED
    (data,) = [f for f in Path(loaded.location).glob("*.parquet")]
    pq.write_table(pq.read_table(data).slice(0, 1), data)
    (data.parent / f".{data.name}.crc").unlink()  # Hadoop's checksum of the old file

    run = orchestrator.run_job(cleanse.pk)
    assert not run.succeeded
    failed = InstanceExec.objects.filter(process__name="cleanse_0").order_by("-id").first()
    assert "is not published" in failed.error
    assert "clean_orders.adds_up (fail: accounting()): 1 of 1 rows failed" in failed.error
    assert "2 published upstream" in failed.error
    # Nothing of that batch reaches a reader of the clean table.
    clean = HiveTable.objects.get(table_name="clean_orders")
    assert {p.batch_id for p in Partition.objects.filter(table=clean, state="published")} == {
        step_run.parent.target_batch_id
    }
