"""Expectations on what a Spark step writes (processes/step_kinds/expectations.py): what
registration refuses, then rules checked on a batch as a step writes it: counted (warn),
taken out to the quarantine table (drop), or failing the step before the batch is written
(fail), with the results kept on the run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from batches.models import HiveTable
from processes import orchestrator
from processes.models import InstanceExec
from processes.step_kinds import expectations
from tests.helpers.factories import grant_root
from tests.helpers.jobs import build_job, callable_step, load_step, scan_step, sql_step

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


def run_after(orders, report):
    """The orders scanned and loaded, then ``report``'s run on them."""
    for job in orders:
        assert orchestrator.run_job(job.pk).succeeded
    return orchestrator.run_job(report.pk)


QUERY = "SELECT id, email, amount FROM lake.orders WHERE batch_id IN ({batch_ids})"


def test_warn_counts_drop_quarantines_and_the_run_keeps_every_result(team, orders, spark):
    report = build_job(
        team,
        "report",
        [
            sql_step(
                "report_sql",
                QUERY,
                output="lake.clean_orders",
                upstream=[orders[1]],
                expect={
                    "clean_orders.positive": "drop: amount >= 0",
                    "clean_orders.has_email": "warn: email IS NOT NULL",
                    "clean_orders.one_each": "warn: unique(id)",
                    "clean_orders.some": "fail: rows(1, *)",
                },
            )
        ],
    )
    run = run_after(orders, report)
    assert run.succeeded
    kept = spark.read.parquet(HiveTable.objects.get(table_name="clean_orders").location)
    assert sorted(r.id for r in kept.collect()) == [1, 2, 3]  # the -1.0 row is out
    quarantined = spark.read.parquet(
        HiveTable.objects.get(table_name="clean_orders_quarantine").location
    ).collect()
    step_run = InstanceExec.objects.get(process__name="report_sql")
    assert [(r.id, r.amount, r.failed_rules, r.rule_text, r.run_id) for r in quarantined] == [
        (3, -1.0, "positive", "amount >= 0", step_run.pk)
    ]
    results = {r["rule"]: r for r in step_run.checks}
    assert {k: (r["checked"], r["passed"], r["failed"]) for k, r in results.items()} == {
        "positive": (4, 3, 1),
        "has_email": (4, 3, 1),
        "one_each": (4, 2, 2),
        "some": (4, 4, 0),
    }
    assert results["positive"]["samples"] == [{"amount": -1.0}]
    assert results["has_email"]["samples"] == [{"email": None}]
    assert results["one_each"]["samples"] == [{"id": 3}]
    assert results["some"]["action"] == "fail" and results["positive"]["kind"] == "row"


def test_a_failed_fail_rule_writes_nothing_and_names_the_rule(team, orders, spark):
    report = build_job(
        team,
        "report",
        [
            sql_step(
                "report_sql",
                QUERY,
                output="lake.unique_orders",
                upstream=[orders[1]],
                expect={"unique_orders.one_each": "fail: unique(id)"},
            )
        ],
    )
    run = run_after(orders, report)
    assert not run.succeeded
    step_run = InstanceExec.objects.get(process__name="report_sql")
    assert "batch" in step_run.error and "is not written" in step_run.error
    assert "unique_orders.one_each (unique(id)): 2 of 4 failed" in step_run.error
    assert step_run.checks[0]["failed"] == 2
    table = HiveTable.objects.filter(table_name="unique_orders").first()
    assert table is None or not list(Path(table.location).glob("batch_id=*"))
