"""A Spark step's log says which Spark application ran it, how its Spark jobs
and stages went, and, when Spark refused its statement, Spark's own words."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from processes import logfiles, orchestrator
from processes.models import ExecState, InstanceExec
from processes.step_kinds.spark_progress import _connect_progress
from processes.step_kinds.spark_session import application_id, is_connect
from tests.helpers.jobs import build_job, sql_step


@pytest.fixture
def numbers(tmp_path, settings, spark):
    """A view of the ids 1 and 2 in the worker's session (BDRE never registered it)."""
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    settings.BDRE_LOG_DIR = tmp_path / "step-logs"
    spark.range(1, 3).createOrReplaceTempView("numbers")
    yield "numbers"
    spark.catalog.dropTempView("numbers")


def step_log(outcome) -> str:
    step_run = InstanceExec.objects.get(parent_id=outcome.instance_exec_id)
    return "\n".join(logfiles.read(step_run).lines)


# connect: the progress a step logs comes from a Connect server another way (its listener).
@pytest.mark.connect
@pytest.mark.django_db
def test_a_failed_spark_sql_step_logs_its_application_and_sparks_analysis_error(
    team, spark, numbers
):
    job = build_job(
        team,
        "report",
        [sql_step("report_0", "SELECT no_such_column FROM numbers", output="lake.n")],
    )
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    step_run = InstanceExec.objects.get(parent_id=outcome.instance_exec_id)
    assert step_run.exec_state_id == ExecState.FAILED
    text = step_log(outcome)
    assert f"INFO bdre.spark: Spark application {application_id(spark)}" in text
    assert "Traceback (most recent call last):" in text
    assert "UNRESOLVED_COLUMN" in text
    assert "`no_such_column`" in text
    assert "AnalysisException" in text


@pytest.mark.connect
@pytest.mark.django_db
def test_a_spark_steps_log_follows_its_spark_jobs_and_stages(team, spark, numbers):
    job = build_job(
        team,
        "report",
        [sql_step("report_0", "SELECT id * 2 AS twice FROM numbers", output="lake.n")],
    )
    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded, outcome.error
    text = step_log(outcome)
    assert "step report_0 finished in" in text
    if is_connect(spark):  # the server's progress of each operation, when it reports any
        assert "Spark application" in text
        return
    jobs = [line for line in text.splitlines() if "bdre.spark: Spark job" in line]
    assert jobs, text
    assert any(" SUCCEEDED (stages " in line for line in jobs), text
    assert "tasks done, 0 running, 0 failed" in text
    # The step's job group is not the next step's.
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


class ConnectClient:
    """What a Connect session offers a step for progress: handlers the server's reports of
    each operation's stages are given to (SparkSession.registerProgressHandler)."""

    def __init__(self) -> None:
        self.handlers: list = []

    def registerProgressHandler(self, handler) -> None:
        self.handlers.append(handler)

    def removeProgressHandler(self, handler) -> None:
        self.handlers.remove(handler)

    def report(self, operation: str, *stages: tuple[int, int, int, bool]) -> None:
        reported = [
            SimpleNamespace(stage_id=i, num_completed_tasks=done, num_tasks=total, done=ended)
            for i, done, total, ended in stages
        ]
        for handler in list(self.handlers):
            handler(stages=reported, inflight_tasks=0, operation_id=operation, done=False)


def test_through_connect_a_stage_is_logged_each_time_its_progress_changes(caplog):
    """The Connect path in this process (the cluster tests run it against a real server,
    where how often the server reports is its own)."""
    client = ConnectClient()
    with caplog.at_level(logging.INFO, logger="bdre.spark"), _connect_progress(client):
        client.report("op-1", (0, 0, 4, False))
        client.report("op-1", (0, 0, 4, False))  # nothing new: not logged again
        client.report("op-1", (0, 4, 4, True), (1, 1, 2, False))
        client.report("op-2", (0, 2, 2, True))  # another operation's stage 0
    client.report("op-3", (0, 1, 1, True))  # after the step: its handler is gone
    assert client.handlers == []
    assert [r.getMessage() for r in caplog.records] == [
        "Spark stage 0 of operation op-1: 0/4 tasks done",
        "Spark stage 0 of operation op-1: 4/4 tasks done, finished",
        "Spark stage 1 of operation op-1: 1/2 tasks done",
        "Spark stage 0 of operation op-2: 2/2 tasks done, finished",
    ]
