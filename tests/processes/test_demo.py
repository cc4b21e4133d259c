"""The demo set-up behind `make demo` (the non-interactive part)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from batches.locations import team_landing
from processes import demo
from processes.models import Process
from tests.helpers.admin import url

ROOT = Path(__file__).resolve().parents[2]
JOBS = (
    "clickstream_ingest",
    "clickstream_pages_ingest",
    "clickstream_shred",
    "clickstream_pages",
    "clickstream_daily",
    "clickstream_daily_export",
)

pytestmark = pytest.mark.django_db


def test_demo_command_prints_the_login_once_and_is_idempotent(capsys):
    call_command("demo")
    first = capsys.readouterr().out
    match = re.search(r"login:\s+demo / (\S+)\s+\(admin of team demo-team\)", first)
    assert match, first
    assert re.search(r"superuser:\s+demo-admin / \S+", first), first
    call_command("demo")
    second = capsys.readouterr().out
    assert match.group(1) not in second
    assert "password unchanged" in second
    assert Process.objects.filter(parent__isnull=True).count() == len(JOBS)


def test_demo_pipeline_links_ingest_to_shred_to_daily():
    call_command("demo", stdout=io.StringIO())
    shred = Process.objects.get(name="clickstream_shred_events")
    daily = Process.objects.get(name="clickstream_daily_summary")
    assert [p.name for p in shred.enqueuing_processes.all()] == ["clickstream_ingest"]
    assert [p.name for p in daily.enqueuing_processes.all()] == ["clickstream_shred"]
    assert daily.batch_cut_pattern == "EOD"
    assert shred.process_type.job_kind == "spark.shred"
    export = Process.objects.get(name="clickstream_daily_export_csv")
    assert [p.name for p in export.enqueuing_processes.all()] == ["clickstream_daily"]
    load = Process.objects.get(name="clickstream_pages_load")
    assert [p.name for p in load.enqueuing_processes.all()] == ["clickstream_pages_ingest"]
    assert [s.name for s in load.next_processes.all()] == ["clickstream_pages_cleanse"]
    # Every step kind of BDRE's, in one demo.
    assert set(
        Process.objects.filter(parent__isnull=False).values_list(
            "process_type__job_kind", flat=True
        )
    ) == {"ingest.scan", "spark.shred", "spark.sql", "spark.export", "spark.load", "spark.cleanse"}
    # Both scans list the demo team's own landing folder (storage every team is granted),
    # each taking its own files.
    for name, include in (
        ("clickstream_ingest_scan", "*.tsv"),
        ("clickstream_pages_scan", "pages-*.csv"),
    ):
        props = {p.key: p.value for p in Process.objects.get(name=name).properties.all()}
        assert props["location"] == team_landing(shred.bus_domain.team_id).as_uri()
        assert props["include"] == include


def test_demo_schedules_the_pipeline():
    from processes import schedules

    call_command("demo", stdout=io.StringIO())
    scans, followers = JOBS[:2], JOBS[2:]
    for name in scans:
        job = Process.objects.get(name=name)
        assert schedules.schedule_of(job.pk).every_seconds == demo.DEMO_SCAN_SECONDS
    for name in followers:
        assert schedules.runs_on_upstream(Process.objects.get(name=name).pk), name


def test_the_demo_login_is_a_team_member_and_its_superuser_has_the_admin(client):
    from processes.demo import set_up_demo

    demo = set_up_demo()
    assert client.login(username=demo.username, password=demo.password)
    # The team's pages show its pipeline; Django admin is the installation's, not the team's.
    html = client.get("/").content.decode()
    for name in ("clickstream_ingest", "clickstream_shred", "clickstream_daily"):
        assert name in html
    assert client.get(url(type(demo.jobs[0]), "changelist")).status_code == 302
    client.logout()
    assert client.login(username=demo.superuser, password=demo.superuser_password)
    html = client.get(url(type(demo.jobs[0]), "changelist")).content.decode()
    for name in ("clickstream_ingest", "clickstream_shred", "clickstream_daily"):
        assert name in html


def test_generated_landing_files_have_duplicates_bad_lines_and_a_file_in_flight(tmp_path):
    files, unique = demo.generate_landing(tmp_path, files=2, events=200)
    assert len(unique) == 400
    names = sorted(p.name for p in files)
    assert names[-1].endswith(".tsv_current") and len(names) == 3
    lines = files[0].read_text().splitlines()
    assert len(lines) > 200  # duplicates and bad lines on top of the unique events
    assert any(len(line.split("\t")) != 131 for line in lines)
    assert not list(tmp_path.glob("_*"))  # written under a temporary name, then renamed


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
    # Where a notebook finds them: the published catalog (Beat syncs it, batches/catalog.py).
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
found["page_view_events"] = spark.sql(
    f"SELECT count(*) FROM {events} WHERE event = 'page_view'"
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
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL") and not k.startswith("SPARK_")
    } | {"BDRE_VAR_DIR": str(local_demo.var_dir)}
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
        env={k: v for k, v in os.environ.items() if not k.startswith("SPARK_")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
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
