"""The Spark JVMs that run team code hold none of the installation's secrets in their
environment (docs/security.md, "Team code in Spark"): a worker's own driver and the Python
workers it forks, a Spark Connect server, and the standalone master and worker. Each is
started for real from an environment full of sentinel secrets, and ``/proc/<pid>/environ``
of the JVM and of its children is read while it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bdre import spark_cluster
from tests.helpers.jvm_env import SECRETS, children, command_line, environ, secrets_in

ROOT = Path(__file__).resolve().parents[3]


def test_a_jvm_keeps_what_spark_needs_and_none_of_the_installations_secrets():
    env = {
        **SECRETS,
        "PATH": "/usr/bin",
        "HOME": "/home/bdre",
        "JAVA_HOME": "/usr/lib/jvm/java-17",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_REMOTE": "sc://connect:15002/;token=sentinel",
        "PYSPARK_PYTHON": "/opt/venv/bin/python",
        "HADOOP_CONF_DIR": "/etc/hadoop",
        "DJANGO_SETTINGS_MODULE": "bdre.settings",
        "BDRE_WAREHOUSE": "/data/warehouse",
        "SOME_SERVICE_URL": "https://user:sentinel@host/",
        "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=true",
    }
    kept = spark_cluster.jvm_env(env)
    assert kept == {
        "PATH": "/usr/bin",
        "HOME": "/home/bdre",
        "JAVA_HOME": "/usr/lib/jvm/java-17",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": "/opt/venv/bin/python",
        "HADOOP_CONF_DIR": "/etc/hadoop",
        "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=true",
    }


def test_only_a_connect_servers_environment_holds_its_token(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    assert secrets_in(spark_cluster.daemon_env()) == []
    served = spark_cluster.daemon_env(connect_token="the-servers-token")
    assert served["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == "the-servers-token"
    assert secrets_in(served, but="SPARK_CONNECT_AUTHENTICATE_TOKEN") == []


# A worker's session in a process of its own, as a Spark-queue worker makes it: it runs a
# Python function on the executors (so the JVM forks its Python workers), prints the JVM's
# pid and what the function saw of its environment, and holds the session until its stdin
# closes.
WORKER_RUN = """
import json, os, sys
import django
django.setup()
from processes.step_kinds.spark_session import get_spark
session = get_spark()
context = session.sparkContext
(seen,) = context.parallelize([0], 1).map(lambda _: json.dumps(dict(os.environ))).collect()
print(json.dumps({"jvm": context._gateway.proc.pid, "python": json.loads(seen)}))
sys.stdout.flush()
sys.stdin.read()
session.stop()
"""


@pytest.mark.spark
def test_a_workers_spark_driver_and_its_python_workers_hold_no_secret(tmp_path):
    connect = ("SPARK_CONNECT_MODE_ENABLED", "BDRE_TEST_SPARK", "PYSPARK_GATEWAY_PORT")
    env = {
        **{k: v for k, v in os.environ.items() if k not in connect},
        **SECRETS,
        "DJANGO_SETTINGS_MODULE": "bdre.settings",
        "BDRE_VAR_DIR": str(tmp_path / "var"),
        "BDRE_WAREHOUSE": str(tmp_path / "warehouse"),
        "SPARK_MASTER": "local[1]",
        "SPARK_DRIVER_MEMORY": "512m",
        "SPARK_REMOTE": "",
    }
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_RUN],
        env=env,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line, worker.stderr.read()[-3000:] if worker.stderr else ""
        seen = json.loads(line)
        jvm = seen["jvm"]
        assert "java" in Path(command_line(jvm)[0]).name
        assert jvm in children(worker.pid)
        # The worker itself holds them (it needs them); the JVM and what it forks do not.
        assert secrets_in(environ(worker.pid)) == sorted(SECRETS)
        assert secrets_in(environ(jvm)) == []
        assert environ(jvm)["SPARK_HOME"]  # what Spark needs is still there
        forked = [pid for pid in children(jvm) if "python" in command_line(pid)[0]]
        assert forked, "the function ran in no Python worker of the JVM's"
        for pid in forked:
            assert secrets_in(environ(pid)) == [], command_line(pid)
        assert secrets_in(seen["python"]) == []
    finally:
        try:
            worker.communicate(input="", timeout=120)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, worker.stderr


@pytest.mark.cluster
def test_the_standalone_master_and_worker_hold_no_secret(tmp_path, monkeypatch):
    # A Connect server's JVM: tests/bdre/test_spark_connect_token.py.
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    cluster = spark_cluster.start(tmp_path, cores=1, memory="512m")
    try:
        for daemon in cluster.processes:
            assert Path(command_line(daemon.pid)[0]).name == "java"
            assert secrets_in(environ(daemon.pid)) == [], command_line(daemon.pid)
    finally:
        cluster.stop()
