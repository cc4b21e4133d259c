"""A load reads only the team's own files. A file its scan registered and
that was then replaced, before the load ran, by a hard link to another team's file, a
symbolic link or a FIFO fails the load with the reason, and nothing of it is written
(``processes.step_kinds.spark_io.readable_files``). Each case runs the real steps on Spark."""

from __future__ import annotations

import os

import pytest

from batches.locations import team_landing
from batches.models import File, HiveTable
from processes import orchestrator
from processes.models import InstanceExec, ProcessLog
from processes.registry import StepSpec
from tests.helpers.jobs import LOAD, SHRED, build_job, scan_step

pytestmark = pytest.mark.django_db
PAYROLL = "name,salary\nalice,100000\n"


@pytest.fixture
def landings(tmp_path, settings, spark, team):
    """The two teams' landing folders: the other team's holds its payroll."""
    settings.BDRE_LANDING = tmp_path / "landing"
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    ours, theirs = team_landing(team.group.pk), team_landing(team.other_group.pk)
    (ours / "feed").mkdir(parents=True)
    theirs.mkdir(parents=True)
    (theirs / "payroll.csv").write_text(PAYROLL)
    return ours, theirs


def scanned(team, ours, kind: int = LOAD, props: dict | None = None):
    """``ours/feed/orders.csv`` registered by a scan, and a job of one step of ``kind``
    (a csv load by default) waiting to read it."""
    (ours / "feed" / "orders.csv").write_text("name,salary\nbob,1\n")
    ingest = build_job(team, "ingest", [scan_step("ingest_0", ours / "feed")])
    load = props or {"load": {"format": "csv", "table": "lake.orders"}}
    loader = build_job(
        team, "loader", [StepSpec("loader_0", kind, upstream=[ingest.pk], properties=load)]
    )
    assert orchestrator.run_job(ingest.pk).succeeded
    assert File.objects.get().path == (ours / "feed" / "orders.csv").as_uri()
    return loader


def assert_load_refused(loader, said: str) -> None:
    outcome = orchestrator.run_job(loader.pk)
    assert not outcome.succeeded
    assert said in outcome.error, outcome.error
    run = InstanceExec.objects.get(process__parent=loader)
    assert said in ProcessLog.objects.get(instance_exec=run, message_id="location.refused").message
    assert not HiveTable.objects.filter(table_name="orders").exists()


def test_a_registered_file_replaced_by_a_hard_link_to_another_teams_file_fails_the_load(
    team, landings
):
    ours, theirs = landings
    loader = scanned(team, ours)
    (ours / "feed" / "orders.csv").unlink()
    os.link(theirs / "payroll.csv", ours / "feed" / "orders.csv")
    assert_load_refused(loader, "orders.csv: a hard link")


def test_a_registered_file_replaced_by_a_fifo_fails_the_load_without_waiting_on_it(team, landings):
    ours, _ = landings
    loader = scanned(team, ours)
    (ours / "feed" / "orders.csv").unlink()
    os.mkfifo(ours / "feed" / "orders.csv")
    assert_load_refused(loader, "orders.csv: not a regular file")


def test_a_registered_file_replaced_by_a_symlink_within_the_teams_folder_fails_the_load(
    team, landings
):
    ours, _ = landings
    loader = scanned(team, ours)
    (ours / "elsewhere.csv").write_text("name,salary\ncarol,2\n")
    (ours / "feed" / "orders.csv").unlink()
    os.symlink(ours / "elsewhere.csv", ours / "feed" / "orders.csv")
    assert_load_refused(loader, "orders.csv: not a regular file")


def test_a_registered_files_folder_replaced_by_a_link_to_another_teams_fails_the_load(
    team, landings
):
    ours, theirs = landings
    loader = scanned(team, ours)
    (ours / "feed" / "orders.csv").unlink()
    (ours / "feed").rmdir()
    (theirs / "orders.csv").write_text(PAYROLL)
    os.symlink(theirs, ours / "feed")
    assert_load_refused(loader, "outside the storage granted to the team")


def test_a_shred_step_refuses_a_registered_file_replaced_by_a_hard_link_too(team, landings):
    ours, theirs = landings
    loader = scanned(team, ours, SHRED, {"shred": {"database": "lake"}})
    (ours / "feed" / "orders.csv").unlink()
    os.link(theirs / "payroll.csv", ours / "feed" / "orders.csv")
    outcome = orchestrator.run_job(loader.pk)
    assert not outcome.succeeded
    assert "orders.csv: a hard link" in outcome.error, outcome.error


def test_the_teams_own_file_still_loads(team, landings):
    ours, _ = landings
    loader = scanned(team, ours)
    outcome = orchestrator.run_job(loader.pk)
    assert outcome.succeeded, outcome.error
    assert HiveTable.objects.filter(dbname="lake", table_name="orders").exists()
