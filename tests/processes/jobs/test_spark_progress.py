"""Issue 21, point 1: a Spark step's log says which Spark application ran it, how its Spark jobs
and stages went, and, when Spark refused its statement, Spark's own words."""

from __future__ import annotations

import pytest

from processes import logfiles, orchestrator
from processes.jobs.spark_session import application_id, is_connect
from processes.models import ExecState, InstanceExec
from tests.helpers.jobs import build_job, sql_step

# connect: the progress a step logs comes from a Connect server another way (its listener).
pytestmark = [pytest.mark.django_db, pytest.mark.spark, pytest.mark.connect]


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
