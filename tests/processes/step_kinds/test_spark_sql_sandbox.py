"""A team developer's ``spark.sql`` step runs only a query over registered
tables. Each attack is written as he would write it: through the API (a 400 on the property)
and, for a property changed behind the registry's back, through the step with a real Spark
session (the run fails with the reason, and nothing the statement reached lands anywhere)."""

from __future__ import annotations

import pytest

from batches.models import HiveTable
from processes import orchestrator
from processes.models import ExecState, InstanceExec, Process, ProcessLog, Property
from processes.step_kinds import spark_sql, sql_guard
from tests.helpers.api import api_as
from tests.helpers.factories import grant_root
from tests.helpers.jobs import build_job, load_step, scan_step, sql_document, sql_step
from tests.helpers.spark import published

pytestmark = pytest.mark.django_db

# One statement per refused form, with the words the run's error must carry.
ATTACKS = [
    (
        "SELECT TRANSFORM(id) USING 'sh -c \"cat /etc/passwd\"' AS (line) FROM lake.things",
        "TRANSFORM",
    ),
    ("SELECT value FROM text.`file:///etc/passwd`", "by path"),
    ("SELECT * FROM parquet.`{warehouse}/other_team/orders`", "by path"),
    ("SELECT * FROM csv.`/etc/passwd`", "by path"),
    ("SELECT * FROM json.`/etc/passwd`", "by path"),
    ("SELECT * FROM orc.`/etc`", "by path"),
    ("SELECT * FROM binaryFile.`/etc/passwd`", "by path"),
    ("CREATE TABLE lake.x LOCATION '/tmp/elsewhere' AS SELECT 1 AS a", "LOCATION"),
    ("ADD JAR /tmp/evil.jar", "ADD JAR"),
    ("ADD FILE /etc/passwd", "ADD JAR"),
    ("ADD ARCHIVE /tmp/evil.zip", "ADD JAR"),
    ("CREATE FUNCTION pwn AS 'com.evil.Udf' USING JAR '/tmp/evil.jar'", "USING JAR"),
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home') AS home", "reflect"),
    ("SELECT java_method('java.lang.System', 'getenv', 'SECRET_KEY') AS key", "java_method"),
    ("SELECT try_reflect('java.lang.System', 'getenv', 'SECRET_KEY') AS key", "try_reflect"),
    ("SET spark.sql.runSQLOnFiles=true", "SET"),
    ("RESET spark.sql.runSQLOnFiles", "RESET"),
    ("INSERT INTO lake.things SELECT * FROM lake.things", "DDL and DML"),
    ("DROP TABLE lake.things", "single SELECT"),
    ("SELECT 1 AS a; SELECT value FROM text.`/etc/passwd`", "one statement"),
    # The guard is an allowlist, and the statement checked is the one Spark runs.
    # Attack 2: the worker's environment and settings through variable substitution.
    (
        "SELECT raise_error(concat('${env:HOME}', ' ', '${spark:spark.sql.warehouse.dir}'))",
        "${ is not allowed",
    ),
    # Attack 3: text hidden from the guard's parser, run by Spark after substitution.
    (
        "SELECT 1 AS a, ${x/*} reflect('java.lang.System','getProperty','user.home') AS b ${y*/}",
        "${ is not allowed",
    ),
    # Attack 1: an XSD (then its DTD) read by the worker, named in from_xml's options.
    (
        "SELECT from_xml('<r>zz</r>', 'r STRING', "
        "map('rowValidationXSDPath', '{landing}/evil.xsd', 'mode', 'FAILFAST')) AS x",
        "rowValidationXSDPath is not allowed",
    ),
    # A line Spark reads as the continuation of a -- comment, and sqlglot as code: attack 1
    # again, hidden in a string to the guard and run by Spark (found in review).
    (
        'SELECT 1 AS a -- \\\n, \'\n, from_xml("<r>zz</r>", "r STRING", '
        'map("rowValidationXSDPath", "{landing}/evil.xsd", "mode", "FAILFAST")) AS b -- \'',
        "backslash at the end of a line",
    ),
    ("SELECT system.builtin.reflect('java.lang.System', 'getenv', 'PATH') AS p", "reflect"),
    ("SELECT input_file_name() AS f FROM lake.things", "input_file_name"),
    ("SELECT no_such_function(1) AS x", "not in the allowed functions (docs/sql.md)"),
]


@pytest.fixture
def lake(tmp_path, settings, spark, team):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    (tmp_path / "landing").mkdir()
    grant_root(team.group, tmp_path / "landing")
    return tmp_path


def behind_the_registry(job: Process, query: str) -> None:
    """The property changed where no service checks it (a database edit, an old row)."""
    Property.objects.filter(process__parent=job, config_group="sql", key="query").update(
        value=query
    )


def assert_refused_and_nothing_written(job: Process, outcome, reason: str, warehouse) -> None:
    assert not outcome.succeeded
    run = InstanceExec.objects.filter(process__parent=job).get()
    assert run.exec_state_id == ExecState.FAILED
    assert "Spark SQL refused" in run.error and reason.lower() in run.error.lower()
    log = ProcessLog.objects.get(instance_exec=run, message_id="sql.refused")
    assert reason.lower() in log.message.lower()
    assert not HiveTable.objects.filter(table_name="stolen").exists()
    written = [p for p in warehouse.rglob("*") if p.is_file()] if warehouse.exists() else []
    assert not any(b"root:" in p.read_bytes() for p in written)


def pipeline(team, query: str) -> dict:
    return sql_document(team.application.name, query, "lake.stolen")


# --- at registration: a 400 on the property -----------------------------------------------


@pytest.mark.parametrize(("attack", "reason"), ATTACKS)
def test_a_developer_cannot_register_a_statement_outside_the_sandbox(team, attack, reason):
    response = api_as(team.developer).post(
        "/api/v1/processes/pipeline/",
        pipeline(team, attack.replace("{warehouse}", "/srv/warehouse").replace("{landing}", "/l")),
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "Spark SQL refused" in response.content.decode()
    assert reason.lower() in response.content.decode().lower()
    assert not Process.objects.filter(name__startswith="report").exists()


def test_a_developer_cannot_change_a_query_into_an_attack_through_the_properties_api(team):
    job = build_job(team, "report", [sql_step("report_sql", "SELECT 1 AS a", output="lake.stolen")])
    prop = Property.objects.get(process__parent=job, key="query")
    dev = api_as(team.developer)
    response = dev.patch(
        f"/api/v1/properties/{prop.pk}/",
        {"value": "SELECT value FROM text.`file:///etc/passwd`"},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "by path" in response.json()["value"][0]
    created = dev.post(
        "/api/v1/properties/",
        {
            "process": prop.process_id,
            "config_group": "sql",
            "key": "query2",
            "value": "SELECT 1",
        },
        format="json",
    )
    assert created.status_code == 201, created.content  # only sql.query is a statement
    prop.refresh_from_db()
    assert prop.value == "SELECT 1 AS a"


# --- when the step runs: the run fails with the reason ------------------------------------


@pytest.mark.parametrize(("attack", "reason"), ATTACKS)
def test_a_statement_outside_the_sandbox_fails_its_run_and_writes_nothing(
    team, lake, attack, reason
):
    job = build_job(team, "report", [sql_step("report_sql", "SELECT 1 AS a", output="lake.stolen")])
    behind_the_registry(
        job,
        attack.replace("{warehouse}", str(lake / "warehouse")).replace(
            "{landing}", str(lake / "landing")
        ),
    )
    outcome = orchestrator.run_job(job.pk)
    assert_refused_and_nothing_written(job, outcome, reason, lake / "warehouse")


def test_placeholders_are_rendered_before_the_statement_is_checked(team, lake):
    job = build_job(team, "report", [sql_step("report_sql", "SELECT 1 AS a", output="lake.stolen")])
    behind_the_registry(
        job, "SELECT * FROM text.`/etc/passwd` WHERE {target_batch_id} IN ({batch_ids})"
    )
    outcome = orchestrator.run_job(job.pk)
    assert_refused_and_nothing_written(job, outcome, "by path", lake / "warehouse")


# Spark's own layer, should a statement get past the guard: the session's settings and
# Spark's grammar refuse each form again.
SPARK_REFUSES = [
    ("SELECT value FROM text.`file:///etc/passwd`", "TABLE_OR_VIEW_NOT_FOUND"),
    ("SELECT * FROM binaryFile.`/etc/passwd`", "TABLE_OR_VIEW_NOT_FOUND"),
    ("SELECT TRANSFORM(1) USING 'cat /etc/passwd' AS (line)", "SQL_RESTRICTED_MODE"),
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home') AS home", "RESTRICTED"),
    ("SELECT java_method('java.lang.System', 'getenv', 'PATH') AS p", "RESTRICTED"),
    ("SELECT try_reflect('java.lang.System', 'getenv', 'PATH') AS p", "RESTRICTED"),
    ("SET spark.sql.runSQLOnFiles=true", "one query"),
    ("ADD JAR /tmp/evil.jar", "one query"),
    ("CREATE TABLE lake.x LOCATION '/tmp/elsewhere' AS SELECT 1 AS a", "one query"),
    ("INSERT INTO lake.stolen SELECT 1", "one query"),
    # Command words Spark would also read as a table's name after FROM (
    ("RESET", "one query"),
    ("USE other", "one query"),
    ("CLEAR CACHE", "one query"),
]


def bypass_the_guard(monkeypatch) -> None:
    """The guard passes anything: where the registry and the orchestrator ask it (the kind's
    check of ``sql.query``) and where the step asks it of the rendered statement."""
    monkeypatch.setattr(sql_guard, "check_statement", lambda statement: None)
    monkeypatch.setattr(spark_sql, "check_statement", lambda statement: None)


@pytest.mark.connect  # what Spark Connect changes: run again through a server
@pytest.mark.parametrize(("attack", "reason"), SPARK_REFUSES)
def test_with_the_guard_bypassed_spark_itself_still_refuses(
    team, lake, monkeypatch, attack, reason
):
    bypass_the_guard(monkeypatch)
    job = build_job(team, "report", [sql_step("report_sql", "SELECT 1 AS a", output="lake.stolen")])
    behind_the_registry(job, attack)
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    run = InstanceExec.objects.filter(process__parent=job).get()
    assert reason.lower() in run.error.lower()
    assert not HiveTable.objects.filter(table_name="stolen").exists()


@pytest.mark.connect  # what Spark Connect changes: run again through a server
def test_with_the_guard_bypassed_spark_substitutes_no_variable_into_the_statement(
    team, lake, monkeypatch
):
    """Attack 2 behind the guard: Spark's variable substitution is off, so the run's error is
    the statement's own text, not the worker's home or settings."""
    bypass_the_guard(monkeypatch)
    job = build_job(team, "report", [sql_step("report_sql", "SELECT 1 AS a", output="lake.stolen")])
    behind_the_registry(
        job, "SELECT raise_error(concat('${env:HOME}', ' ', '${spark:spark.sql.warehouse.dir}'))"
    )
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    run = InstanceExec.objects.filter(process__parent=job).get()
    assert "${env:HOME} ${spark:spark.sql.warehouse.dir}" in run.error


@pytest.mark.connect  # what Spark Connect changes: run again through a server
def test_the_session_substitutes_no_variable(spark):
    assert spark.conf.get("spark.sql.variable.substitute") == "false"
    assert spark.sql("SELECT '${env:HOME}' AS home").collect()[0]["home"] == "${env:HOME}"


@pytest.mark.connect  # what Spark Connect changes: run again through a server
def test_the_session_cannot_be_talked_out_of_restricted_mode(spark):
    from pyspark.errors import AnalysisException

    assert spark.conf.get("spark.sql.runSQLOnFiles") == "false"
    with pytest.raises(AnalysisException, match="CANNOT_MODIFY_STATIC_CONFIG"):
        spark.conf.set("spark.sql.restrictedMode.enabled", "false")


# --- and a semantic query still runs ------------------------------------------------------


def test_a_semantic_query_with_a_cte_a_join_a_window_and_aggregates_still_runs(team, lake, spark):
    landing = lake / "landing"
    (landing / "orders.json").write_text(
        '{"id": 1, "cust": "a", "amount": 2.5}\n{"id": 2, "cust": "a", "amount": 4.0}\n'
        '{"id": 3, "cust": "b", "amount": 1.0}\n{"id": 4, "cust": "c", "amount": 9.0}\n'
    )
    ingest = build_job(team, "ingest", [scan_step("ingest_scan", landing)])
    orders = build_job(
        team,
        "orders",
        [
            load_step("orders_load", "lake.orders", format="json", upstream=[ingest]),
            sql_step(
                "orders_rank",
                """
                            WITH o AS (
                                SELECT cust, amount FROM lake.orders
                                WHERE batch_id IN ({batch_ids})
                            ),
                            c AS (SELECT DISTINCT cust FROM lake.orders)
                            SELECT c.cust, count(*) AS n, sum(o.amount) AS total,
                                   rank() OVER (ORDER BY sum(o.amount) DESC) AS place
                            FROM c JOIN o ON o.cust = c.cust
                            GROUP BY c.cust
                        """,
                output="lake.customer_rank",
            ),
        ],
    )
    assert orchestrator.run_job(ingest.pk).succeeded
    outcome = orchestrator.run_job(orders.pk)
    assert outcome.succeeded, outcome.error
    rows = published(spark, HiveTable.objects.get(table_name="customer_rank").location)
    assert sorted((r["cust"], r["n"], r["total"], r["place"]) for r in rows.collect()) == [
        ("a", 2, 6.5, 2),
        ("b", 1, 1.0, 3),
        ("c", 1, 9.0, 1),
    ]
