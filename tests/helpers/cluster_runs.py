"""What the cluster tests (tests/cluster/test_local_and_standalone.py, test_connect.py) do on their
target: run a representative Spark test of each step kind again, in a pytest of its own whose
session is the cluster's or the Connect server's (``BDRE_TEST_SPARK``, tests/conftest.py), so
the same assertions prove the same rows; and compare a run of `make demo`'s pipeline there
with the one on local[2] (every step kind, row for row). The rest of the Spark tests run on
local[2] only: each is about a transform or a step body, which the target does not change,
and the demo runs their code on both targets (docs/testing.md)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys

from django.conf import settings

from tests.helpers.demo_runs import ROOT, DemoRun
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


def application_ids(run: DemoRun) -> set[str]:
    """The Spark applications the run's steps recorded (``InstanceExec``)."""
    with sqlite3.connect(run.var_dir / "bdre.sqlite3") as db:
        rows = db.execute(
            "SELECT DISTINCT spark_application_id FROM processes_instanceexec "
            "WHERE spark_application_id != ''"
        ).fetchall()
    return {row[0] for row in rows}


def assert_same_outputs(run: DemoRun, local: DemoRun) -> None:
    assert local.returncode == 0, local.out + local.log
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
