"""`make demo`'s pipeline and Spark tests through a Spark Connect server on a standalone
cluster: a representative test of each step kind, and what Connect changes (the `connect`
marker: the server's sandbox, per-step options, team boundaries in its shared catalog, the
progress a step logs). The same rows as on local[2] (tests/helpers/cluster_runs.py)."""

from __future__ import annotations

import pytest

from tests.helpers.cluster_runs import (
    SPARK_TESTS,
    application_ids,
    assert_same_outputs,
    check_spark_tests,
)
from tests.helpers.demo_runs import run_demo


@pytest.mark.demo
def test_the_demo_pipeline_writes_the_same_rows_through_spark_connect(
    connect_server, tmp_path, request
):
    run = run_demo(tmp_path / "var", SPARK_REMOTE=connect_server.remote_url)
    assert run.returncode == 0, run.out + run.log
    # Through the server: its one application on the cluster, a Connect session per worker.
    ids = application_ids(run)
    assert ids and all(" session " in i for i in ids)
    # Asked for only now: the other cluster module's process runs it meanwhile.
    assert_same_outputs(run, request.getfixturevalue("local_demo"))


@pytest.mark.spark  # in the pytest it starts
def test_the_spark_tests_pass_through_spark_connect(connect_server, tmp_path):
    check_spark_tests(connect_server.remote_url, tmp_path / "var", SPARK_TESTS["connect"], 20)
