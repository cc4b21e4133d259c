"""The same pipelines on a standalone cluster and through Spark Connect as on local[2].

`make demo`'s pipeline (every step kind: ingest, shred with the four deduplication
strategies, Spark SQL, export, and the page list's load and cleanse) runs on the cluster and
through Connect, and every table it writes holds the same rows as the local[2] run's. Then a
representative Spark test of each step kind is run again, in a pytest of its own whose
session is the cluster's or the Connect server's (``BDRE_TEST_SPARK``, tests/conftest.py):
the same assertions, so the same rows; through Connect, where the session is the server's,
also what Connect changes (the `connect` marker). The rest of the Spark tests run on
local[2] only: each is about a transform or a step body, which the target does not change,
and the demo runs their code on both targets (docs/testing.md)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys

import pytest
from django.conf import settings

from tests.helpers.demo_runs import ROOT, run_demo
from tests.helpers.machine import MACHINE_PART_MISSING

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

# Run again in a pytest of its own on each target: a representative test of each step kind
# (the `representative` marker) everywhere, and through Connect what Connect changes
# (`connect`: the server's sandbox, per-step options, team boundaries in its shared catalog,
# the progress a step logs).
SPARK_TESTS = {
    "standalone": "representative",
    "connect": "representative or connect",
}


def run_spark_tests(
    target: str, var_dir, selection: str
) -> tuple[subprocess.CompletedProcess[str], dict]:
    # On the embedded default (SQLite): the test database of this session is not shared.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"BDRE_TEST_SPARK": target, "BDRE_VAR_DIR": str(var_dir)}
    # The S3A jars this checkout fetched already (tests/conftest.py), not another download.
    env.setdefault("BDRE_SPARK_JARS_DIR", settings.BDRE_SPARK_JARS_DIR)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
         f"spark and not worker and not cluster and ({selection})", "tests/processes/jobs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {
        word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error)", summary)
    }
    return done, counts


def check_spark_tests(target: str, var_dir, selection: str, at_least: int) -> None:
    done, counts = run_spark_tests(target, var_dir, selection)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert counts.get("passed", 0) >= at_least, done.stdout[-2000:]
    # Only the one_jvm_only tests (an in-memory Derby database, S3A settings changed in the
    # driver's JVM while it runs) may be passed over, and, on a machine that lacks a part a
    # test needs (Debian's JDBC driver, say), that test: where everything is required (CI),
    # it failed instead.
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    listed = sum(int(n) for n in re.findall(r"^SKIPPED \[(\d+)\]", "\n".join(skipped), re.M))
    assert listed == counts.get("skipped", 0), done.stdout[-2000:]
    accepted = ("needs Spark in this process's JVM", MACHINE_PART_MISSING)
    assert all(any(reason in line for reason in accepted) for line in skipped), skipped


def test_the_spark_tests_pass_on_a_standalone_cluster(standalone, tmp_path):
    check_spark_tests(standalone.master_url, tmp_path / "var", SPARK_TESTS["standalone"], 3)


# The order of these tests matters: the Connect server (a session fixture, started by the first
# test that needs it) keeps an application holding one of the cluster's two cores until the
# session ends, and the standalone demo's worker has two Spark processes, an application of
# one core each. Started after the server, the second one waits for a core that never comes
# free (the demo timed out in CI that way), so the standalone demo runs before anything
# starts the server.
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


def test_the_spark_tests_pass_through_spark_connect(connect_server, tmp_path):
    check_spark_tests(connect_server.remote_url, tmp_path / "var", SPARK_TESTS["connect"], 20)


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
