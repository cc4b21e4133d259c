"""A standalone Spark cluster (one Master, one Worker with 2 cores) and a Spark Connect server
on it, started once for the session from the PySpark wheel (bdre/spark_cluster.py)."""

from __future__ import annotations

import pytest

from bdre import spark_cluster


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    cluster = spark_cluster.start(tmp_path_factory.mktemp("spark-cluster"), cores=2, memory="2g")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory, standalone):
    """A Connect server whose application runs on the cluster with one of its two cores, so
    that a standalone application can run beside it. Its static settings are BDRE's: the
    Spark SQL sandbox's, which no client can turn off."""
    from processes.step_kinds.spark_session import session_conf

    work = tmp_path_factory.mktemp("spark-connect")
    # What a worker's own session would be built with (the sandbox's static settings, one
    # core of the cluster, the executors' Python), as `manage.py spark_connect_server` does.
    conf = session_conf(standalone.master_url) | {
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        "spark.executor.memory": "1g",
        "spark.driver.host": "127.0.0.1",
    }
    server = spark_cluster.start_connect(work, master=standalone.master_url, conf=conf)
    yield server
    server.stop()
