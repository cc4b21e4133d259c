"""Tables are the team's own. Each attack is what a developer of another
team (``team.other_application``, team "marketing") would register: a step writing or reading
``sales.orders`` after team "analytics" (``team.application``) registered it."""

from __future__ import annotations

import pytest

from batches import tables
from batches.models import HiveTable
from processes import orchestrator
from processes.models import BusDomain
from processes.registry import StepSpec
from tests.helpers.factories import grant_root
from tests.helpers.jobs import CLEANSE, EXPORT, build_job, sql_step
from tests.helpers.spark import published

pytestmark = pytest.mark.django_db


@pytest.fixture
def lake(tmp_path, settings, spark):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    return tmp_path


def write_orders(application: BusDomain, name: str, who: str):
    """A job of ``application`` whose step writes ``sales.orders`` with one row naming ``who``."""
    query = f"SELECT 1 AS id, '{who}' AS who, 2.5 AS amount"
    job = build_job(application, name, [sql_step(f"{name}_0", query, output="sales.orders")])
    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded, outcome.error
    return outcome


def rows_at(spark, location: str) -> list[str]:
    return sorted(r["who"] for r in published(spark, location).collect())


def test_a_step_of_another_team_writing_the_same_name_gets_its_own_table(team, lake, spark):
    write_orders(team.application, "a_orders", "a")
    (theirs,) = HiveTable.objects.filter(dbname="sales", table_name="orders")
    location = theirs.location

    write_orders(team.other_application, "b_orders", "b")

    theirs.refresh_from_db()
    assert (theirs.team, theirs.bus_domain, theirs.location) == (
        team.group,
        team.application,
        location,
    )
    assert rows_at(spark, location) == ["a"]
    ours = HiveTable.objects.exclude(pk=theirs.pk).get(dbname="sales", table_name="orders")
    assert (ours.team, ours.bus_domain) == (team.other_group, team.other_application)
    assert ours.location.startswith(str(lake / "warehouse" / f"team-{team.other_group.pk}"))
    assert not ours.location.startswith(location) and not location.startswith(ours.location)
    assert rows_at(spark, ours.location) == ["b"]


def read_orders(application: BusDomain, name: str, output: str = "mine.copy"):
    query = "SELECT who FROM sales.orders"
    job = build_job(application, name, [sql_step(f"{name}_0", query, output=output)])
    return orchestrator.run_job(job.pk)


@pytest.mark.connect  # what Spark Connect changes: run again through a server
def test_spark_sql_of_another_team_cannot_read_an_unshared_table(team, lake, spark):
    write_orders(team.application, "a_orders", "a")
    # The owner reads it first, on the same worker: its session then knows sales.orders.
    assert read_orders(team.application, "a_reader", "sales.copy").succeeded
    outcome = read_orders(team.other_application, "b_reader")
    assert not outcome.succeeded
    assert "sales.orders is not a table your team may read" in outcome.error
    assert not HiveTable.objects.filter(dbname="mine").exists()


@pytest.mark.parametrize(
    "kind, properties",
    [
        (
            CLEANSE,
            {
                "cleanse": {
                    "source_table": "sales.orders",
                    "rules": '[{"name": "who", "type": "string"}]',
                    "clean_table": "mine.clean",
                    "invalid_table": "mine.invalid",
                }
            },
        ),
        (EXPORT, {"export": {"source_table": "sales.orders", "format": "csv"}}),
    ],
    ids=["cleanse", "export"],
)
def test_cleanse_and_export_of_another_team_cannot_read_an_unshared_table(
    team, lake, spark, kind, properties
):
    write_orders(team.application, "a_orders", "a")
    exports = lake / "exports"
    if kind == EXPORT:
        grant_root(team.other_group, exports)  # its folder is granted; the table is not
        properties["export"]["location"] = exports.as_uri()
    step = build_job(
        team.other_application, "b_step", [StepSpec("b_step_0", kind, properties=properties)]
    )
    outcome = orchestrator.run_job(step.pk)
    assert not outcome.succeeded
    assert "sales.orders" in outcome.error
    assert not exports.exists()
    assert not HiveTable.objects.filter(dbname="mine").exists()


def share_orders(team) -> None:
    tables.share(
        team.admin, HiveTable.objects.get(team=team.group, table_name="orders"), team.other_group
    )


@pytest.mark.connect  # what Spark Connect changes: run again through a server
def test_a_shared_table_is_read_by_the_other_team_and_never_written(team, lake, spark):
    write_orders(team.application, "a_orders", "a")
    share_orders(team)

    read = read_orders(team.other_application, "b_reader")
    assert read.succeeded, read.error
    copy = HiveTable.objects.get(dbname="mine", table_name="copy")
    assert copy.team == team.other_group
    assert rows_at(spark, copy.location) == ["a"]

    query = "SELECT 2 AS id, 'b' AS who, 0.0 AS amount"
    overwrite = build_job(
        team.other_application,
        "b_overwrite",
        [sql_step("b_overwrite_0", query, output="sales.orders")],
    )
    outcome = orchestrator.run_job(overwrite.pk)
    assert not outcome.succeeded
    assert "shared with your team read-only" in outcome.error
    (theirs,) = HiveTable.objects.filter(table_name="orders")
    assert theirs.team == team.group
    assert rows_at(spark, theirs.location) == ["a"]


def test_a_shared_table_is_readable_by_cleanse_of_the_other_team(team, lake, spark):
    write_orders(team.application, "a_orders", "a")
    share_orders(team)
    rules = '[{"name": "who", "type": "string"}]'
    cleanse = build_job(
        team.other_application,
        "b_cleanse",
        [
            StepSpec(
                "b_cleanse_0",
                CLEANSE,
                properties={
                    "cleanse": {
                        "source_table": "sales.orders",
                        "rules": rules,
                        "clean_table": "mine.c",
                    }
                },
            )
        ],
    )
    outcome = orchestrator.run_job(cleanse.pk)
    assert outcome.succeeded, outcome.error
    assert HiveTable.objects.get(dbname="mine", table_name="c").team == team.other_group


def test_the_teams_own_table_wins_over_a_shared_one_of_the_same_name(team, lake, spark):
    write_orders(team.application, "a_orders", "a")
    write_orders(team.other_application, "b_orders", "b")
    share_orders(team)

    outcome = read_orders(team.other_application, "b_reader")
    assert outcome.succeeded, outcome.error
    copy = HiveTable.objects.get(dbname="mine", table_name="copy")
    assert rows_at(spark, copy.location) == ["b"]


def test_unsharing_stops_the_next_run_reading(team, lake, spark):
    write_orders(team.application, "a_orders", "a")
    share_orders(team)
    assert read_orders(team.other_application, "b_reader").succeeded
    tables.unshare(team.admin, HiveTable.objects.get(table_name="orders").shares.get())
    reader = build_job(
        team.other_application,
        "b_again",
        [sql_step("b_again_0", "SELECT who FROM sales.orders", output="mine.again")],
    )
    outcome = orchestrator.run_job(reader.pk)
    assert not outcome.succeeded
    assert "sales.orders is not a table your team may read" in outcome.error
