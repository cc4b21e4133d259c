"""How a worker's SparkSession is configured (processes/jobs/spark_session.py), without
starting Spark: BDRE's defaults, then spark-defaults.conf, then SPARK_CONF, then the
sandbox's settings, which neither may change."""

from __future__ import annotations

import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from processes.jobs.spark_session import SANDBOX_CONF, session_conf


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
