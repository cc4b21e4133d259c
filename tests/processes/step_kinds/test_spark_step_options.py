"""A step's own Spark options (its ``spark`` properties, docs/operations.md "Per-step Spark
options"): refused at registration through the API (a 400 with the reason) and, when changed
behind the registry's back, when the step runs (the run fails with the reason); an allowed
one holds on the worker's session while its step runs and is gone for the next step, and the
run records the options in effect, secrets redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from batches.models import HiveTable
from processes import orchestrator
from processes.models import ExecState, InstanceExec, Process, ProcessLog, Property
from processes.step_kinds.spark_session import REDACTED, get_spark, is_connect
from tests.helpers.api import api_as
from tests.helpers.jobs import build_job, sql_step

pytestmark = pytest.mark.django_db
ROWS = "SELECT * FROM VALUES (1), (2), (3) AS t(x)"
PER_FILE = "spark.sql.files.maxRecordsPerFile"


def register(team, step: dict) -> object:
    return api_as(team.developer).post(
        "/api/v1/processes/pipeline/",
        {
            "name": "tuned",
            "application": team.application.name,
            "process_type": "generic-job",
            "steps": [step],
        },
        format="json",
    )


# --- at registration: a 400 with the reason -------------------------------------------------


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("spark.executor.memory", "send the step to their queue with run.spark_queue"),
        ("spark.sql.runSQLOnFiles", "the Spark SQL sandbox's"),
        ("spark.sql.catalog.mine", "the catalog's settings"),
    ],
)
def test_a_pipeline_with_an_option_a_step_may_not_set_is_a_400(team, key, reason):
    response = register(
        team,
        {
            "name": "tuned_sql",
            "process_type": "generic-sql",
            "properties": {
                "sql": {"query": ROWS, "output_table": "lake.tuned"},
                "spark": {key: "8g"},
            },
        },
    )
    assert response.status_code == 400, response.content
    assert f"spark option {key}: " in response.content.decode()
    assert reason in response.content.decode()
    assert not Process.objects.filter(name__startswith="tuned").exists()


def sql_step_document(options: dict) -> dict:
    return {
        "name": "tuned_sql",
        "process_type": "generic-sql",
        "properties": {"sql": {"query": ROWS, "output_table": "lake.tuned"}, "spark": options},
    }


def test_an_adaptive_option_naming_a_class_is_a_400_that_names_it(team):
    # A prefix (spark.sql.adaptive.) would let this through, and the shared worker would
    # load the class ("not a subclass of CostEvaluator").
    key = "spark.sql.adaptive.customCostEvaluatorClass"
    response = register(team, sql_step_document({key: "java.lang.String"}))
    assert response.status_code == 400, response.content
    assert (
        f"spark option {key}: not one of the Spark SQL options a step may set"
        in response.content.decode()
    )
    assert not Process.objects.filter(name__startswith="tuned").exists()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("spark.sql.shuffle.partitions", "many", "an integer from 1 to 100000"),
        ("spark.sql.adaptive.enabled", "java.lang.String", "true or false"),
        ("spark.sql.files.maxPartitionBytes", "lots", "a size like 64m or 128MB"),
        ("spark.sql.parquet.compression.codec", "org.evil.Codec", "one of none, uncompressed"),
    ],
)
def test_a_badly_typed_spark_option_is_a_400_that_names_it_and_what_it_expects(
    team, key, value, expected
):
    response = register(team, sql_step_document({key: value}))
    assert response.status_code == 400, response.content
    assert f"spark option {key}: {value!r} is not {expected}" in response.content.decode()
    assert not Process.objects.filter(name__startswith="tuned").exists()


def test_a_pipeline_with_well_typed_options_is_registered(team):
    options = {
        "spark.sql.shuffle.partitions": "400",
        "spark.sql.adaptive.enabled": "TRUE",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": "64m",
        "spark.sql.files.maxPartitionBytes": "128MB",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.broadcastTimeout": "600s",
        "spark.sql.parquet.compression.codec": "zstd",
    }
    response = register(team, sql_step_document(options))
    assert response.status_code in (200, 201), response.content
    step = Process.objects.get(name="tuned_sql")
    stored = Property.objects.filter(process=step, config_group="spark")
    assert set(stored.values_list("key", flat=True)) == set(options)


def test_a_spark_option_on_a_step_that_is_not_spark_is_a_400(team):
    response = register(
        team,
        {
            "name": "tuned_call",
            "process_type": "python-callable",
            "properties": {"spark": {"spark.sql.shuffle.partitions": "8"}},
        },
    )
    assert response.status_code == 400, response.content
    assert "only Spark steps take spark options" in response.content.decode()


def test_the_properties_api_refuses_an_option_and_takes_an_allowed_one(team):
    step = build_job(team, "tuned", [sql_step("tuned_0", ROWS, output="lake.tuned_0")]).steps.get()
    api = api_as(team.developer)
    refused = api.post(
        "/api/v1/properties/",
        {"process": step.pk, "config_group": "spark", "key": "spark.driver.memory", "value": "8g"},
        format="json",
    )
    assert refused.status_code == 400, refused.content
    assert (
        "spark option spark.driver.memory: it is fixed when the worker's Spark"
        in (refused.json()["value"][0])
    )
    allowed = api.post(
        "/api/v1/properties/",
        {"process": step.pk, "config_group": "spark", "key": PER_FILE, "value": "1"},
        format="json",
    )
    assert allowed.status_code == 201, allowed.content
    renamed = api.patch(
        f"/api/v1/properties/{allowed.json()['id']}/", {"key": "spark.cores.max"}, format="json"
    )
    assert renamed.status_code == 400, renamed.content
    assert Property.objects.get(process=step, config_group="spark").key == PER_FILE


# --- when the step runs: a property changed behind the registry's back ----------------------


def test_an_option_changed_behind_the_registry_fails_the_run_with_the_reason(team):
    job = build_job(
        team, "tuned", [sql_step("tuned_0", ROWS, output="lake.tuned_0", spark={PER_FILE: "1"})]
    )
    Property.objects.filter(process__parent=job, config_group="spark").update(
        key="spark.executor.memory"
    )
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    run = InstanceExec.objects.filter(process__parent=job).get()
    assert run.exec_state_id == ExecState.FAILED
    assert run.error.startswith(
        "RefusedSparkOption: spark option spark.executor.memory: it is fixed when the "
        "worker's Spark application starts"
    ), run.error
    assert run.spark_conf == {}  # refused before the session was touched
    log = ProcessLog.objects.get(instance_exec=run, message_id="spark.refused")
    assert "spark.executor.memory" in log.message


# --- a real step on the worker's session ----------------------------------------------------


def files_of(table: str, batch_id: int) -> list[Path]:
    location = HiveTable.objects.get(table_name=table).location
    # The attempt's folder inside the batch's (batches.partitions).
    return sorted(Path(location.removeprefix("file:"), f"batch_id={batch_id}").rglob("*.parquet"))


@pytest.fixture
def session_secrets(spark):
    """Options of the installation's that a run must not show."""
    secrets = {
        "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
        "spark.bdre.metastore.url": "jdbc:postgresql://bdre:pw@db/bdre",
    }
    for key, value in secrets.items():
        spark.conf.set(key, value)
    yield secrets
    for key in secrets:
        spark.conf.unset(key)


@pytest.mark.connect  # what Spark Connect changes: run again through a server
def test_a_steps_options_hold_while_it_runs_and_are_gone_for_the_next_step(
    team, spark, settings, tmp_path, session_secrets
):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    session = get_spark()
    partitions_before = session.conf.get("spark.sql.shuffle.partitions")
    assert session.conf.get(PER_FILE, None) is None
    # The first step writes a file per row; the second, after it on the same session, not.
    job = build_job(
        team,
        "tuned",
        [
            sql_step(
                "tuned_0",
                ROWS,
                output="lake.tuned_0",
                spark={PER_FILE: "1", "spark.sql.shuffle.partitions": "7"},
            ),
            sql_step("tuned_1", ROWS, output="lake.tuned_1"),
        ],
    )
    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded, outcome.error

    assert len(files_of("tuned_0", outcome.target_batch_id)) == 3
    assert len(files_of("tuned_1", outcome.target_batch_id)) < 3
    assert session.conf.get(PER_FILE, None) is None
    assert session.conf.get("spark.sql.shuffle.partitions") == partitions_before

    tuned, plain = InstanceExec.objects.filter(process__parent=job).order_by("id")
    assert tuned.spark_conf[PER_FILE] == "1"
    assert tuned.spark_conf["spark.sql.shuffle.partitions"] == "7"
    assert PER_FILE not in plain.spark_conf
    assert plain.spark_conf["spark.sql.shuffle.partitions"] == partitions_before
    for run in (tuned, plain):
        assert run.spark_application_id
        # Redacted where shown; a Spark Connect server does not list a client's Hadoop
        # options at all.
        assert {run.spark_conf.get(key, REDACTED) for key in session_secrets} == {REDACTED}
        if not is_connect(session):
            assert set(session_secrets) <= set(run.spark_conf)
        assert run.spark_conf["spark.sql.session.timeZone"] == "UTC"  # the installation's
        assert run.spark_ui_url == ""  # the suite's session runs without its UI
    shown = api_as(team.viewer).get(f"/api/v1/runs/{tuned.pk}/").json()
    assert (shown["spark_conf"], shown["spark_ui_url"]) == (tuned.spark_conf, "")
    assert shown["spark_application_id"] == tuned.spark_application_id


@pytest.mark.connect  # what Spark Connect changes: run again through a server
def test_a_badly_typed_value_in_the_registry_fails_the_step_and_leaves_the_session_as_it_was(
    team, spark, settings, tmp_path
):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    session = get_spark()
    before = session.conf.get("spark.sql.shuffle.partitions")
    job = build_job(
        team,
        "tuned",
        [
            sql_step(
                "tuned_0", ROWS, output="lake.tuned_0", spark={"spark.sql.shuffle.partitions": "7"}
            )
        ],
    )
    Property.objects.filter(process__parent=job, config_group="spark").update(value="many")
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    run = InstanceExec.objects.get(process__name="tuned_0")
    assert "spark option spark.sql.shuffle.partitions: 'many' is not an integer" in run.error, (
        run.error
    )
    assert session.conf.get("spark.sql.shuffle.partitions") == before


# --- a step's Spark queue: workers whose executors are sized for it --------------------------


def test_a_spark_step_names_a_queue_of_the_installation_and_goes_there(
    team, settings, sent, django_capture_on_commit_callbacks
):
    from processes import tasks

    settings.BDRE_SPARK_QUEUES = ["spark", "spark-large"]
    refused = register(
        team,
        {
            "name": "big_sql",
            "process_type": "generic-sql",
            "properties": {
                "sql": {"query": ROWS, "output_table": "lake.big"},
                "run": {"spark_queue": "spark-huge"},
            },
        },
    )
    assert refused.status_code == 400, refused.content
    assert "run.spark_queue 'spark-huge' is not one of BDRE_SPARK_QUEUES: spark, spark-large" in (
        refused.content.decode()
    )
    big = build_job(team, "big", [sql_step("big_0", ROWS, output="lake.big_0")])
    step = big.steps.get()
    answer = api_as(team.developer).post(
        "/api/v1/properties/",
        {"process": step.pk, "config_group": "run", "key": "spark_queue", "value": "spark-large"},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    assert orchestrator.queue_of(step) == "spark-large"
    with django_capture_on_commit_callbacks(execute=True):
        tasks.start_run(big.pk)
    assert [kw["queue"] for args, kw in sent if len(args) == 2] == ["spark-large"]
    # A queue the installation dropped since: the default Spark queue, whose worker fails
    # the step saying why (a queue nobody reads would keep it waiting forever).
    settings.BDRE_SPARK_QUEUES = ["spark"]
    assert orchestrator.queue_of(step) == "spark"


def test_only_spark_steps_name_a_spark_queue(team, settings):
    settings.BDRE_SPARK_QUEUES = ["spark", "spark-large"]
    response = register(
        team,
        {
            "name": "queued_call",
            "process_type": "python-callable",
            "properties": {
                "callable": {"path": "processes.examples.noop"},
                "run": {"spark_queue": "spark-large"},
            },
        },
    )
    assert response.status_code == 400, response.content
    assert "run.spark_queue: only Spark steps go to a Spark queue" in (response.content.decode())
