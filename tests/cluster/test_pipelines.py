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

from tests.helpers.demo_runs import JOBS, ROOT, run_demo
from tests.helpers.machine import MACHINE_PART_MISSING
from tests.helpers.spark import user_environment

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
         f"spark and not worker and not cluster and ({selection})", "tests/processes/step_kinds"],
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


# --- make demo's run on local[2], which the cluster runs below are compared with ------------
# In this module with them: `make test` gives a module's tests to one test process
# (pytest-xdist's loadfile), so the demo runs once for all of them.


# The demo's embedded worker runs the pipeline's Spark steps; no fixture of the test says so.
@pytest.mark.worker
@pytest.mark.spark
def test_make_demo_runs_the_pipeline_on_the_embedded_worker(local_demo):
    """The non-interactive part of `make demo`, from an empty var folder: migrate, set up,
    let the embedded worker's schedule run the pipeline, print the summary."""
    assert local_demo.returncode == 0, local_demo.out + local_demo.log
    out = local_demo.out
    assert re.search(r"login:\s+demo / \S+", out)
    for job in JOBS:
        assert f"last finished run of {job}: SUCCESS" in out, out
    counts = local_demo.counts()
    # 2 event files, then 1 more, and the page list; the one being written waits.
    assert counts["files registered"] == 4
    # The schedule's ticks that find nothing new are quiet checks: every ingest run
    # registered files, and every batch is a file's or a run's that did work.
    assert counts["empty ingest runs"] == 0
    assert 1 <= counts["ingest runs"] <= counts["files registered"]
    assert counts["batches"] == counts["files registered"] + counts["runs"]
    assert (
        counts["events in"]
        == counts["events out"]
        + counts["bad rows"]
        + counts["duplicates, in batch natural"]
        + counts["duplicates, cross batch natural"]
    )
    assert counts["bad rows"] > 0 and counts["duplicates, in batch natural"] > 0
    assert counts["duplicates, cross batch natural"] > 0
    assert counts["duplicates, cross batch synthetic"] > 0
    # The summary says how the numbers add up, with its own numbers.
    adds_up = (
        f"{counts['events in']} = {counts['events out']} + {counts['bad rows']} + "
        f"{counts['duplicates, in batch natural']} + {counts['duplicates, cross batch natural']}"
    )
    assert adds_up in out and "kept in events out under new ids" in out
    assert "default.daily_page_views" in out and "default.atomic_events" in out
    # The page list's branch: load, then cleanse (4 rows refused), and the export.
    assert (counts["page list rows"], counts["valid page rows"]) == (64, 60)
    assert counts["invalid page rows"] == 4
    assert "default.pages" in out and "default.pages_invalid" in out
    assert counts["rows exported"] > 0
    # The daily summary waits for the end of each day: one row per day it holds, in the table
    # and in the export, and every page view of the closed day counted in it.
    tables = local_demo.tables()
    daily = tables["default.daily_page_views"]
    exported = tables["exports.daily_page_views"]
    assert len({day for day, _ in daily}) == len(daily) >= 1, daily
    assert len({day for day, _ in exported}) == len(exported) == len(daily), exported
    assert sorted(map(str, daily)) == sorted(map(str, exported))
    events = local_demo.table("default.atomic_events", ["event", "collector_tstamp"])
    closed = {day.isoformat() for day, _ in daily}
    assert sum(views for _, views in daily) == sum(
        1 for event, at in events if event == "page_view" and str(at)[:10] in closed
    )
    # The day the last file brought is still open: nothing of it summed yet.
    assert any(str(at)[:10] not in closed for _, at in events)
    assert "days summed:         2026-11-20\n" in out
    assert "days still open:     2026-11-21\n" in out
    # Its expectations, checked on every batch the steps wrote, none of them failing.
    assert "daily_page_views.one_row_a_day (fail: unique(day)): 1 row checked, 0 failed" in out, out
    checked = re.search(
        r"atomic_events.event_id_present \(drop: event_id IS NOT NULL\): (\d+) rows checked, "
        r"0 failed",
        out,
    )
    assert checked and int(checked[1]) == counts["events out"], out
    assert "pages.https_url (drop: page_url LIKE 'https://%'): 60 rows checked, 0 failed" in out
    # Every line the shred read, and every row the cleanse read, written or set aside.
    accounted = (
        f"atomic_events.every_line_accounted (fail: accounting()): {counts['events in']} rows "
        "checked, 0 failed"
    )
    assert accounted in out, out
    assert "pages.every_row_accounted (fail: accounting()): 64 rows checked, 0 failed" in out
    # Where a notebook finds them: the published catalog (Beat syncs it: batches/catalog/).
    assert re.search(r"in the catalog as: .*\bt\d+_default\.atomic_events\b", out), out


NOTEBOOK = """
import json

found = {}
for database in sorted(d.name for d in spark.catalog.listDatabases()):
    for table in spark.catalog.listTables(database):
        name = f"{database}.{table.name}"
        found[name] = {
            "partitions": sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {name}").collect()),
            "rows": spark.sql(f"SELECT count(*) FROM {name}").first()[0],
        }
events = [t for t in found if t.endswith(".atomic_events")][0]
daily = [t for t in found if t.endswith(".daily_page_views")][0]
# A user's own query across two of BDRE's tables, by their catalog names.
found["page_views"] = spark.sql(
    f"SELECT sum(page_views) FROM {daily}"
).first()[0]
# The page views of the days the summary holds: the closed days (the last one waits).
found["page_view_events"] = spark.sql(
    f"SELECT count(*) FROM {events} WHERE event = 'page_view' "
    f"AND to_date(collector_tstamp) IN (SELECT day FROM {daily})"
).first()[0]
print("FOUND " + json.dumps(found))
spark.stop()
"""


@pytest.mark.worker
@pytest.mark.spark
def test_a_notebook_session_lists_and_queries_the_tables_the_demo_wrote(local_demo, tmp_path):
    """What docs/operations.md tells a notebook user: `manage.py sync_catalog --print-conf`
    gives the lines of a SparkSession that sees BDRE's tables, with their batch partitions,
    in the published catalog; here on the tables the demo's pipeline wrote."""
    import json
    import os
    import subprocess
    import sys

    assert local_demo.returncode == 0, local_demo.out + local_demo.log
    env = user_environment(os.environ, "DATABASE_URL", "CELERY_BROKER_URL") | {
        "BDRE_VAR_DIR": str(local_demo.var_dir)
    }
    manage = [sys.executable, str(ROOT / "manage.py"), "sync_catalog"]
    synced = subprocess.run(manage, env=env, capture_output=True, text=True, timeout=300)
    assert synced.returncode == 0, synced.stdout + synced.stderr[-3000:]
    conf = subprocess.run(
        [*manage, "--print-conf"], env=env, capture_output=True, text=True, timeout=300
    )
    assert conf.returncode == 0, conf.stderr[-3000:]
    cwd = tmp_path / "notebook"
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", conf.stdout + NOTEBOOK],
        cwd=cwd,
        env=user_environment(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # The embedded Derby metastore logs in the var folder, not where the notebook runs.
    assert not (cwd / "derby.log").exists()
    assert (local_demo.var_dir / "derby.log").exists()
    found = json.loads(
        next(x for x in done.stdout.splitlines() if x.startswith("FOUND ")).removeprefix("FOUND ")
    )

    written = local_demo.tables()  # read from the Parquet folders themselves
    warehouse = local_demo.var_dir / "warehouse"
    for name, rows in written.items():
        database, table = name.split(".")
        if database == "exports":  # the export's CSV files: a folder, no table
            continue
        matches = [k for k in found if k.endswith(f"_{database}.{table}")]
        assert len(matches) == 1, (name, sorted(found))
        published = found[matches[0]]
        assert published["rows"] == len(rows), name
        (folder,) = warehouse.glob(f"team-*/{database}/{table}")
        assert published["partitions"] == sorted(
            p.name for p in folder.glob("batch_id=*") if p.is_dir()
        ), name
    assert found["page_views"] == found["page_view_events"] > 0


# --- the cluster and Spark Connect -------------------------------------------------------------


@pytest.mark.spark  # in the pytest it starts
def test_the_spark_tests_pass_on_a_standalone_cluster(standalone, tmp_path):
    check_spark_tests(standalone.master_url, tmp_path / "var", SPARK_TESTS["standalone"], 2)


# The order of these tests matters: the Connect server (a session fixture, started by the first
# test that needs it) keeps an application holding one of the cluster's two cores until the
# session ends, and the standalone demo's worker has two Spark processes, an application of
# one core each. Started after the server, the second one waits for a core that never comes
# free (the demo would time out), so the standalone demo runs before anything
# starts the server.
@pytest.mark.parametrize("target", ["standalone", "connect_server"])
def test_the_demo_pipeline_writes_the_same_rows_as_on_local(target, local_demo, tmp_path, request):
    assert local_demo.returncode == 0, local_demo.out + local_demo.log
    server = request.getfixturevalue(target)
    # Without the published catalog, which the local run's notebook test reads: its syncs
    # (a JVM of their own, about a minute each, two a run) prove nothing of the cluster.
    if target == "standalone":
        run = run_demo(tmp_path / "var", SPARK_MASTER=server.master_url, BDRE_CATALOG="0")
    else:
        run = run_demo(tmp_path / "var", SPARK_REMOTE=server.remote_url, BDRE_CATALOG="0")
    assert run.returncode == 0, run.out + run.log
    ids = application_ids(run)
    if target == "standalone":
        # On the cluster: standalone applications are app-..., local ones local-...
        assert {i.split("-")[0] for i in ids} == {"app"}
    else:
        # Through the server: its one application on the cluster, a Connect session per worker.
        assert ids and all(" session " in i for i in ids)
    assert_same_outputs(run, local_demo)


@pytest.mark.spark  # in the pytest it starts
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
