"""How a worker's SparkSession is configured (processes/step_kinds/spark_session.py), without
starting Spark: BDRE's defaults, then spark-defaults.conf, then SPARK_CONF, then the
sandbox's settings, which neither may change; the event log; the Spark options a step may set
for itself, set for the step and put back after it; what a run records of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from django.core.exceptions import ImproperlyConfigured

from processes.step_kinds.checks import check_step_properties
from processes.step_kinds.spark_conf import (
    SANDBOX_CONF,
    STEP_GROUP,
    RefusedSparkOption,
    step_options,
)
from processes.step_kinds.spark_session import (
    REDACTED,
    effective_conf,
    session_conf,
    step_conf,
    ui_url,
)


@pytest.fixture
def conf_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    return tmp_path


def test_a_standalone_application_takes_one_core_unless_told_otherwise(settings):
    settings.SPARK_CONF = {}
    assert session_conf("spark://m:7077")["spark.cores.max"] == "1"
    assert "spark.cores.max" not in session_conf("local[2]")
    settings.SPARK_CONF = {"spark.cores.max": "4"}
    assert session_conf("spark://m:7077")["spark.cores.max"] == "4"


def test_executors_run_the_workers_own_python(settings):
    settings.SPARK_CONF = {}
    assert session_conf("spark://m:7077")["spark.pyspark.python"] == sys.executable


def test_spark_conf_wins_over_spark_defaults_which_wins_over_bdres(settings, conf_dir):
    (conf_dir / "spark-defaults.conf").write_text(
        "# the operator's\nspark.executor.memory   3g\nspark.sql.shuffle.partitions\t64\n"
    )
    settings.SPARK_CONF = {"spark.executor.memory": "4g"}
    conf = session_conf("spark://m:7077")
    assert conf["spark.executor.memory"] == "4g"
    assert conf["spark.sql.shuffle.partitions"] == "64"
    assert conf["spark.sql.session.timeZone"] == "UTC"  # BDRE's, untouched


@pytest.mark.parametrize("key", sorted(SANDBOX_CONF))
def test_no_configuration_turns_the_sandbox_off(settings, conf_dir, key):
    settings.SPARK_CONF = {key: "flipped"}
    with pytest.raises(ImproperlyConfigured, match=f"cannot change {key}"):
        session_conf("local[2]")
    settings.SPARK_CONF = {}
    (conf_dir / "spark-defaults.conf").write_text(f"{key} flipped\n")
    with pytest.raises(ImproperlyConfigured, match="Spark SQL sandbox"):
        session_conf("local[2]")


def test_spark_defaults_are_read_as_java_properties(settings, conf_dir):
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.cores.max=4\nspark.executor.memory: 3g\nspark.driver.maxResultSize 2g\n"
    )
    settings.SPARK_CONF = {}
    conf = session_conf("spark://m:7077")
    assert (conf["spark.cores.max"], conf["spark.executor.memory"]) == ("4", "3g")
    assert conf["spark.driver.maxResultSize"] == "2g"


@pytest.mark.parametrize(
    "key", ["spark.remote", "spark.api.mode", "spark.sql.catalog.other", "spark.sql.catalog.x.y"]
)
def test_no_configuration_swaps_the_session_or_adds_a_catalog(settings, key):
    settings.SPARK_CONF = {key: "sc://elsewhere"}
    with pytest.raises(ImproperlyConfigured, match=f"cannot set {key}"):
        session_conf("local[2]")


def test_the_sandbox_values_themselves_may_be_repeated(settings):
    settings.SPARK_CONF = dict(SANDBOX_CONF)
    assert session_conf("local[2]").items() >= SANDBOX_CONF.items()


# --- the event log ---------------------------------------------------------------------------


def test_the_event_log_is_off_unless_switched_on(settings, tmp_path):
    settings.SPARK_CONF = {}
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    settings.SPARK_EVENT_LOG = False
    assert "spark.eventLog.enabled" not in session_conf("local[2]")
    assert not (tmp_path / "warehouse" / "spark-events").exists()


def test_the_event_log_goes_under_the_warehouse_in_a_folder_made_for_it(settings, tmp_path):
    settings.SPARK_CONF = {}
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    settings.SPARK_EVENT_LOG = True
    conf = session_conf("local[2]")
    events = tmp_path / "warehouse" / "spark-events"
    assert conf["spark.eventLog.enabled"] == "true"
    assert conf["spark.eventLog.dir"] == events.as_uri()
    assert events.is_dir()
    settings.SPARK_CONF = {"spark.eventLog.dir": "s3a://logs/spark"}  # the operator's wins
    assert session_conf("local[2]")["spark.eventLog.dir"] == "s3a://logs/spark"


# --- per-step options: what a step may set ---------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "set_as"),
    [
        ("spark.sql.shuffle.partitions", 8, "8"),
        ("spark.sql.adaptive.enabled", True, "true"),
        ("spark.sql.adaptive.enabled", "FALSE", "false"),
        ("spark.sql.adaptive.coalescePartitions.minPartitionSize", "1MB", "1mb"),
        ("spark.sql.adaptive.skewJoin.skewedPartitionFactor", 2.5, "2.5"),
        ("spark.sql.files.maxPartitionBytes", "64m", "64m"),
        ("spark.sql.files.maxPartitionBytes", 134217728, "134217728"),
        ("spark.sql.autoBroadcastJoinThreshold", -1, "-1"),
        ("spark.sql.broadcastTimeout", "5min", "5min"),
        ("spark.sql.parquet.compression.codec", "ZSTD", "zstd"),
    ],
)
def test_a_spark_step_may_set_runtime_sql_options_with_values_of_their_type(key, value, set_as):
    properties = {STEP_GROUP: {key: value}, "load": {"x": "y"}}
    assert step_options("spark.load", properties, spark=True) == {key: set_as}


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("spark.sql.shuffle.partitions", "many", "an integer from 1 to 100000"),
        ("spark.sql.shuffle.partitions", "0", "an integer from 1 to 100000"),
        ("spark.sql.shuffle.partitions", "1000000000", "an integer from 1 to 100000"),
        ("spark.sql.adaptive.enabled", "yes", "true or false"),
        ("spark.sql.files.maxPartitionBytes", "1.5g", "a size like 64m or 128MB"),
        ("spark.sql.files.maxPartitionBytes", "-1", "a size like 64m or 128MB"),
        ("spark.sql.files.maxPartitionBytes", "0", "a size like 64m or 128MB"),
        # The Kelvin sign lower-cases to an ASCII k, which Spark's parser would not read.
        ("spark.sql.files.maxPartitionBytes", "64\u212a", "a size like 64m or 128MB"),
        ("spark.sql.broadcastTimeout", "5\u217fin", "a duration like 300, 300s or 5min"),
        ("spark.sql.autoBroadcastJoinThreshold", "8g", "a size like 64m or 128MB (at most 1g, or"),
        ("spark.sql.broadcastTimeout", "forever", "a duration like 300, 300s or 5min"),
        ("spark.sql.parquet.compression.codec", "com.evil.Codec", "one of none, uncompressed"),
        ("spark.sql.adaptive.skewJoin.skewedPartitionFactor", "1e9", "a number from 1 to 1000"),
    ],
)
def test_a_badly_typed_value_is_refused_with_the_option_and_what_it_expects(key, value, expected):
    with pytest.raises(RefusedSparkOption) as refused:
        step_options("spark.sql", {STEP_GROUP: {key: value}}, spark=True)
    assert str(refused.value).startswith(f"spark option {key}: {value!r} is not {expected}")


def test_a_step_without_spark_options_sets_none():
    assert step_options("spark.sql", {"sql": {"query": "SELECT 1"}}, spark=True) == {}
    assert step_options("python.callable", {}, spark=False) == {}


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("spark.executor.memory", "fixed when the worker's Spark application starts"),
        ("spark.executor.cores", "send the step to their queue with run.spark_queue"),
        ("spark.driver.memory", "fixed when the worker's Spark application starts"),
        ("spark.cores.max", "fixed when the worker's Spark application starts"),
        *[(key, "the Spark SQL sandbox's") for key in sorted(SANDBOX_CONF)],
        ("spark.remote", "the Spark SQL sandbox's and the catalog's"),
        ("spark.api.mode", "the Spark SQL sandbox's and the catalog's"),
        ("spark.sql.catalog.mine", "the Spark SQL sandbox's and the catalog's"),
        ("spark.sql.sources.partitionOverwriteMode", "BDRE's steps rely on"),
        ("spark.sql.session.timeZone", "BDRE's steps rely on"),
        ("spark.sql.legacy.timeParserPolicy", "not one of the Spark SQL options"),
        # No prefix: adaptive execution's options are listed one by one, not the ones that
        # name a class or the optimizer's rules.
        ("spark.sql.adaptive.customCostEvaluatorClass", "not one of the Spark SQL options"),
        ("spark.sql.adaptive.optimizer.excludedRules", "not one of the Spark SQL options"),
        ("spark.sql.adaptive.anythingNew", "not one of the Spark SQL options"),
        ("executor_memory", "not a Spark option"),
    ],
)
def test_what_a_step_may_not_set_is_refused_with_the_reason(key, reason):
    with pytest.raises(RefusedSparkOption, match=f"spark option {key}: .*{reason}"):
        step_options(
            "spark.sql", {STEP_GROUP: {"spark.sql.shuffle.partitions": "8", key: "x"}}, spark=True
        )


@pytest.mark.parametrize("kind", ["python.callable", "ingest.scan", ""])
def test_only_spark_steps_take_spark_options(kind):
    with pytest.raises(RefusedSparkOption, match="only Spark steps"):
        check_step_properties(kind, {STEP_GROUP: {"spark.sql.shuffle.partitions": "8"}}, team_id=0)


# --- per-step options: set for the step, put back after it -----------------------------------


class FakeConf:
    """A session's runtime configuration as both kinds of session answer it."""

    def __init__(self, values: dict[str, str], static: tuple[str, ...] = ()) -> None:
        self.values = dict(values)
        self.static = static

    def isModifiable(self, key: str) -> bool:
        return key not in self.static

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)

    @property
    def getAll(self) -> dict[str, str]:
        return dict(self.values)


class FakeConnectSession:
    def __init__(self, conf: FakeConf) -> None:
        self.conf = conf
        self.is_stopped = False


FakeConnectSession.__module__ = "pyspark.sql.connect.session"  # what is_connect looks at


def test_the_steps_options_hold_during_the_step_and_the_sessions_come_back():
    conf = FakeConf({"spark.sql.shuffle.partitions": "4"})
    session = cast(Any, FakeConnectSession(conf))
    options = {"spark.sql.shuffle.partitions": "400", "spark.sql.adaptive.enabled": "false"}
    with step_conf(session, options):
        assert conf.values == {
            "spark.sql.shuffle.partitions": "400",
            "spark.sql.adaptive.enabled": "false",
        }
    # the session's own value back, and an option it had not set unset again
    assert conf.values == {"spark.sql.shuffle.partitions": "4"}


def test_the_sessions_options_come_back_after_a_failed_step():
    conf = FakeConf({"spark.sql.shuffle.partitions": "4"})
    session = cast(Any, FakeConnectSession(conf))
    with (
        pytest.raises(ZeroDivisionError),
        step_conf(session, {"spark.sql.shuffle.partitions": "9"}),
    ):
        raise ZeroDivisionError
    assert conf.values == {"spark.sql.shuffle.partitions": "4"}


def test_an_option_the_session_cannot_change_fails_the_step_and_changes_nothing():
    conf = FakeConf({}, static=("spark.sql.adaptive.enabled",))
    options = {"spark.sql.shuffle.partitions": "9", "spark.sql.adaptive.enabled": "false"}
    with (
        pytest.raises(RefusedSparkOption, match="this Spark session cannot change it"),
        step_conf(cast(Any, FakeConnectSession(conf)), options),
    ):
        pytest.fail("the step ran")
    assert conf.values == {}


# --- what a run records ------------------------------------------------------------------------


def test_the_recorded_configuration_hides_secrets():
    conf = FakeConf(
        {
            "spark.sql.shuffle.partitions": "8",
            "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
            "spark.hadoop.fs.s3a.access.key": "AKIA",
            "spark.hadoop.javax.jdo.option.ConnectionPassword": "pw",
            "spark.authenticate.secret": "shh",
            "spark.bdre.api.token": "tok",
            "spark.hadoop.google.cloud.auth.service.account.json.credentials": "{}",
            "spark.bdre.metastore.url": "jdbc:postgresql://bdre:pw@db/bdre",
            "spark.bdre.other.url": "jdbc:postgresql://db/bdre?user=bdre&password=pw",
            "spark.app.name": "bdre",
        }
    )
    recorded = effective_conf(cast(Any, FakeConnectSession(conf)))
    shown = {"spark.sql.shuffle.partitions": "8", "spark.app.name": "bdre"}
    assert recorded == {**dict.fromkeys(conf.values, REDACTED), **shown}


def test_a_connect_session_has_no_spark_ui_in_the_worker():
    assert ui_url(cast(Any, FakeConnectSession(FakeConf({})))) == ""


def test_a_classic_session_links_its_ui_when_it_runs_one():
    with_ui = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl="http://10.0.0.5:4040"))
    assert ui_url(cast(Any, with_ui)) == "http://10.0.0.5:4040"
    without = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=None))  # spark.ui.enabled
    assert ui_url(cast(Any, without)) == ""


EVENT_LOG_RUN = """
import urllib.request
import django
django.setup()
from processes.step_kinds.spark_session import get_spark, ui_url
session = get_spark()
assert session.range(5).count() == 5
# The address a step's run links to (spark_ui_url) serves the application's UI.
url = ui_url(session)
page = urllib.request.urlopen(url + "/jobs/", timeout=30).read().decode()
assert "Spark Jobs" in page, page[:500]
print("UI", url)
session.stop()
"""


@pytest.mark.spark
def test_a_worker_session_writes_its_event_log_under_the_warehouse_and_serves_its_ui(tmp_path):
    """In a process of its own: the suite's session was made without the event log and the
    UI, and a JVM takes its static options only when it starts."""
    # A classic session of its own, also when the suite's is a Spark Connect client (PySpark
    # takes SPARK_CONNECT_MODE_ENABLED in its environment to mean Connect).
    connect = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "BDRE_TEST_SPARK")
    env = {
        **{k: v for k, v in os.environ.items() if k not in connect},
        "DJANGO_SETTINGS_MODULE": "bdre.settings",
        "BDRE_VAR_DIR": str(tmp_path / "var"),
        "BDRE_WAREHOUSE": str(tmp_path / "warehouse"),
        "SPARK_EVENT_LOG": "true",
        "SPARK_UI": "true",
        "SPARK_MASTER": "local[1]",
        "SPARK_DRIVER_MEMORY": "512m",
        "SPARK_REMOTE": "",
    }
    done = subprocess.run(
        [sys.executable, "-c", EVENT_LOG_RUN],
        env=env,
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "UI http://" in done.stdout
    # Spark 4 rolls its event logs: a folder per application, its events in compressed
    # files, and a status file that loses its .inprogress when the application has ended.
    (application,) = (tmp_path / "warehouse" / "spark-events").iterdir()
    app_id = application.name.removeprefix("eventlog_v2_")
    assert (application / f"appstatus_{app_id}").exists()
    (events,) = application.glob(f"events_1_{app_id}*")
    assert events.stat().st_size > 0


# --- the channel to a Spark Connect server ----------------------------------------------------


def test_a_worker_sends_the_connect_servers_token_as_the_header_spark_checks():
    from processes.step_kinds.spark_session import connect_channel

    channel = connect_channel("sc://spark-connect:15002", "s3cret")
    # A plain channel (Spark's server has no TLS), the token with every call.
    assert not channel.secure
    assert ("authorization", "Bearer s3cret") in channel.metadata()
    assert channel.endpoint == "spark-connect:15002"


def test_a_token_in_the_remote_url_is_sent_the_same_way_and_the_setting_wins():
    from processes.step_kinds.spark_session import connect_channel

    from_url = connect_channel("sc://localhost:15002/;token=in-url;user_id=bdre", "")
    assert ("authorization", "Bearer in-url") in from_url.metadata()
    assert not from_url.secure and from_url.userId == "bdre"
    setting = connect_channel("sc://localhost:15002/;token=in-url", "the-setting")
    assert list(setting.metadata()) == [("authorization", "Bearer the-setting")]


def test_over_tls_the_token_goes_pysparks_own_way():
    from processes.step_kinds.spark_session import connect_channel

    channel = connect_channel("sc://connect.example:443/;use_ssl=true", "s3cret")
    assert channel.secure and channel.token == "s3cret"
    assert "authorization" not in dict(channel.metadata())


def test_without_a_token_the_channel_sends_none():
    from processes.step_kinds.spark_session import connect_channel

    channel = connect_channel("sc://spark-connect:15002", "")
    assert "authorization" not in dict(channel.metadata())
