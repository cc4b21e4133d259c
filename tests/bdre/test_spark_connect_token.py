"""A Spark Connect server started by bdre/spark_cluster.py answers only clients that send its
token, the one BDRE's workers hold (SPARK_CONNECT_TOKEN); its JVM has the token and none of
the installation's secrets in its environment, and a run's recorded configuration does not
show it (docs/operations.md, "Spark Connect as the cluster's front"; docs/security.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bdre import spark_cluster
from processes.step_kinds.spark_conf import SANDBOX_CONF
from processes.step_kinds.spark_session import connect_channel, effective_conf
from tests.helpers.jvm_env import SECRETS, command_line, environ, secrets_in

pytestmark = pytest.mark.cluster
TOKEN = "the-servers-token-3f9c"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[spark_cluster.ConnectServer]:
    """One server for the module, started from an environment full of sentinel secrets."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in SECRETS.items():
            env.setenv(name, value)
        started = spark_cluster.start_connect(
            tmp_path_factory.mktemp("connect"),
            master="local[1]",
            conf={
                **SANDBOX_CONF,  # what a worker checks of the server it connects to
                "spark.driver.memory": "512m",
                "spark.ui.enabled": "false",
                "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
            },
            token=TOKEN,
        )
    yield started
    started.stop()


def session(channel: Any) -> Any:
    """A Connect client's session that is no process-wide default (get_spark would take one)."""
    from pyspark.sql.connect.session import SparkSession

    return SparkSession(connection=channel)


def count_through(channel: Any) -> int:
    client = session(channel)
    try:
        return int(client.range(3).count())
    finally:
        client.stop()


@pytest.mark.parametrize(
    ("token", "refusal"),
    [("", "No authentication token provided"), ("not-the-token", "Invalid authentication token")],
)
def test_a_client_without_the_servers_token_is_refused(server, token, refusal):
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    url = f"sc://127.0.0.1:{server.port}"
    with pytest.raises(SparkConnectGrpcException, match=refusal):
        count_through(connect_channel(url, token))


def test_a_workers_client_with_the_token_runs_and_its_run_does_not_record_it(server):
    client = session(connect_channel(f"sc://127.0.0.1:{server.port}", TOKEN))
    try:
        assert client.range(3).count() == 3
        recorded = effective_conf(client)
        assert recorded, "the server's configuration"
        assert not [key for key, value in recorded.items() if TOKEN in value or TOKEN in key]
        assert client.conf.get("spark.connect.authenticate.token", None) is None
    finally:
        client.stop()


def test_pysparks_own_client_reaches_it_at_its_remote_url(server):
    # What the cluster tests' suite does (BDRE_TEST_SPARK=<remote_url>): the token in the URL.
    from pyspark.sql.connect.client import DefaultChannelBuilder

    assert server.remote_url == f"sc://localhost:{server.port}/;token={TOKEN}"
    assert count_through(DefaultChannelBuilder(server.remote_url)) == 3


def test_the_servers_jvm_holds_its_token_and_none_of_the_installations_secrets(server):
    (jvm,) = (process.pid for process in server.processes)
    assert command_line(jvm)[0].endswith("java")
    assert environ(jvm)["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == TOKEN
    assert secrets_in(environ(jvm), but="SPARK_CONNECT_AUTHENTICATE_TOKEN") == []
    # Nor on its command line, which any local user's ps shows.
    assert not [arg for arg in command_line(jvm) if TOKEN in arg]


# A Spark-queue worker pointed at the server (SPARK_REMOTE, SPARK_CONNECT_TOKEN), in a process
# of its own: get_spark() makes a session of the process.
WORKER_RUN = """
import django
django.setup()
from pyspark.sql import functions as F
from processes.step_kinds.spark_session import get_spark, is_connect
session = get_spark()
# pyspark.sql.functions too, as the steps call them: they pick the Connect implementation only
# in a process marked as a Connect client's (the demo's steps failed on an assert without it).
print(is_connect(session), session.range(4).select(F.col("id") + 1).count())
"""


@pytest.mark.parametrize(("token", "answer"), [(TOKEN, "True 4"), ("", "UNAUTHENTICATED")])
def test_a_spark_queue_worker_uses_the_server_with_its_token_setting(
    server, tmp_path, token, answer
):
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("BDRE_TEST_SPARK", "SPARK_REMOTE")},
        "DJANGO_SETTINGS_MODULE": "bdre.settings",
        "BDRE_VAR_DIR": str(tmp_path / "var"),
        "SPARK_REMOTE": f"sc://127.0.0.1:{server.port}",
        "SPARK_CONNECT_TOKEN": token,
    }
    done = subprocess.run(
        [sys.executable, "-c", WORKER_RUN],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert answer in done.stdout + done.stderr, done.stderr[-3000:]
