"""`make demo`'s pipeline and a representative Spark test of each step kind on a standalone
cluster (one Master, one Worker of 2 cores, started from the PySpark wheel): the same rows as
on local[2] (tests/helpers/cluster_runs.py)."""

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
def test_the_demo_pipeline_writes_the_same_rows_as_on_local(standalone, tmp_path, request):
    run = run_demo(tmp_path / "var", SPARK_MASTER=standalone.master_url)
    assert run.returncode == 0, run.out + run.log
    # On the cluster: standalone applications are app-..., local ones local-...
    assert {i.split("-")[0] for i in application_ids(run)} == {"app"}
    # Asked for only now: another test process runs it meanwhile (tests/conftest.py).
    assert_same_outputs(run, request.getfixturevalue("local_demo"))


@pytest.mark.spark  # in the pytest it starts
def test_the_spark_tests_pass_on_a_standalone_cluster(standalone, tmp_path):
    check_spark_tests(standalone.master_url, tmp_path / "var", SPARK_TESTS["standalone"], 3)
