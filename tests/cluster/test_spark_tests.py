"""A representative Spark test of each step kind run again on a standalone cluster and
through Spark Connect, in a pytest of its own whose session is the cluster's or the Connect
server's (``BDRE_TEST_SPARK``, tests/conftest.py): the same assertions, so the same rows;
through Connect, where the session is the server's, also what Connect changes (the `connect`
marker). The rest of the Spark tests run on local[2] only: each is about a transform or a
step body, which the target does not change, and the demo runs their code on both targets
(tests/cluster/test_pipelines.py; docs/testing.md).

A module of its own, beside the demo's: `make test` gives each to a process of its own, with
a cluster of its own, and this one needs no demo run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.conf import settings

from tests.helpers.demo_runs import ROOT
from tests.helpers.machine import MACHINE_PART_MISSING

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


@pytest.mark.spark  # in the pytest it starts
def test_the_spark_tests_pass_on_a_standalone_cluster(standalone, tmp_path):
    check_spark_tests(standalone.master_url, tmp_path / "var", SPARK_TESTS["standalone"], 3)


@pytest.mark.spark  # in the pytest it starts
def test_the_spark_tests_pass_through_spark_connect(connect_server, tmp_path):
    check_spark_tests(connect_server.remote_url, tmp_path / "var", SPARK_TESTS["connect"], 20)
