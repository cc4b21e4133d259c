"""The same pipelines on a standalone cluster and through Spark Connect as on local[2].

Every Spark test of the step kinds (load, cleanse, shred with each deduplication strategy, sql,
export, the sandbox and the team boundaries) runs again in a pytest of its own whose session
is the cluster's or the Connect server's (``BDRE_TEST_SPARK``, tests/conftest.py): the same
assertions, so the same rows. Then `make demo`'s pipeline runs on the cluster and through
Connect, and every table it writes holds the same rows as the local[2] run's."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys

import pytest

from tests.demo_runs import ROOT, run_demo

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

SPARK_TESTS = ["tests/processes/jobs", "tests/batches"]
# Not again on each target: the lifecycle's retries and dead letters, whose Spark part (a
# shred) the other shred tests run, and which alone took a third of the re-run's time.
NOT_AGAIN = "not test_retries_and_a_requeued_dead_letter_give_exactly_the_output_of_one_clean_run"


def run_spark_tests(target: str, var_dir) -> tuple[subprocess.CompletedProcess[str], dict]:
    # On the embedded default (SQLite): the test database of this session is not shared.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"BDRE_TEST_SPARK": target, "BDRE_VAR_DIR": str(var_dir)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
         "spark and not worker and not cluster", "-k", NOT_AGAIN, *SPARK_TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {
        word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error)", summary)
    }
    return done, counts


def check_spark_tests(target: str, var_dir) -> None:
    done, counts = run_spark_tests(target, var_dir)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert counts.get("passed", 0) >= 80, done.stdout[-2000:]
    # Only the one_jvm_only test (an in-memory Derby database) may be passed over.
    assert counts.get("skipped", 0) <= 1, done.stdout[-2000:]


def test_the_spark_tests_pass_on_a_standalone_cluster(standalone, tmp_path):
    check_spark_tests(standalone.master_url, tmp_path / "var")


def test_the_spark_tests_pass_through_spark_connect(connect_server, tmp_path):
    check_spark_tests(connect_server.remote_url, tmp_path / "var")


@pytest.mark.parametrize("target", ["standalone", "connect_server"])
def test_the_demo_pipeline_writes_the_same_rows_as_on_local(target, local_demo, tmp_path, request):
    assert local_demo.returncode == 0, local_demo.out + local_demo.log
    server = request.getfixturevalue(target)
    if target == "standalone":
        run = run_demo(tmp_path / "var", SPARK_MASTER=server.master_url)
    else:
        run = run_demo(tmp_path / "var", SPARK_REMOTE=server.remote_url)
    assert run.returncode == 0, run.out + run.log
    ids = application_ids(run)
    if target == "standalone":
        # On the cluster: standalone applications are app-..., local ones local-...
        assert {i.split("-")[0] for i in ids} == {"app"}
    else:
        # Through the server: its one application on the cluster, a Connect session per worker.
        assert ids and all(" session " in i for i in ids)
    assert_same_outputs(run, local_demo)


def application_ids(run) -> set[str]:
    """The Spark applications the run's steps recorded (``InstanceExec``)."""
    with sqlite3.connect(run.var_dir / "bdre.sqlite3") as db:
        rows = db.execute(
            "SELECT DISTINCT spark_application_id FROM processes_instanceexec "
            "WHERE spark_application_id != ''"
        ).fetchall()
    return {row[0] for row in rows}


def assert_same_outputs(run, local) -> None:
    counts, expected = run.counts(), local.counts()
    # How many batches and quiet checks depends on how many scans found nothing yet (how
    # fast each step ran); the numbers of the data do not.
    for timing in ("batches", "quiet checks"):
        counts.pop(timing), expected.pop(timing)
    assert counts == expected
    tables, local_tables = run.tables(), local.tables()
    assert local_tables["default.atomic_events"]  # rows to compare, not two empty runs
    assert sorted(tables) == sorted(local_tables)
    for name, rows in local_tables.items():
        assert tables[name] == rows, name
