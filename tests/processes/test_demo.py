"""The demo set-up behind `make demo` (the non-interactive part)."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from batches.locations import team_landing
from processes import demo, demo_pipelines, registry
from processes.models import Process
from tests.helpers.admin import url
from tests.helpers.demo_runs import JOBS

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


def test_the_demo_is_its_pipeline_documents_as_export_job_gives_them_back():
    """The demo registers its jobs from documents in the pipeline format: exporting what it
    registered gives the same documents, so they import elsewhere as they are."""
    setup = demo.set_up_demo(scan_seconds=7)
    documents = demo_pipelines.documents(
        landing=demo.landing_folder(setup.team).as_uri(),
        exports=demo.export_folder(setup.team).as_uri(),
        scan_seconds=7,
    )
    assert [d["name"] for d in documents] == [j.name for j in setup.jobs]
    assert [j.pk for j in setup.jobs] == sorted(j.pk for j in setup.jobs)  # upstream first
    for job, document in zip(setup.jobs, documents, strict=True):
        exported = registry.export_job(job)
        schedule = exported.pop("schedule")
        wanted = dict(document)
        expected_schedule = wanted.pop("schedule")
        assert exported == wanted
        assert {k: schedule[k] for k in expected_schedule} == expected_schedule


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


def test_demo_scan_seconds_sets_the_scans_timer_and_a_plain_rerun_keeps_it():
    from processes import schedules

    call_command("demo", "--scan-seconds", "5", stdout=io.StringIO())
    call_command("demo", stdout=io.StringIO())
    for name in JOBS[:2]:
        assert schedules.schedule_of(Process.objects.get(name=name).pk).every_seconds == 5


def test_demo_refuses_a_scan_timer_under_a_second():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--scan-seconds must be 1 or more"):
        call_command("demo", "--scan-seconds", "0", stdout=io.StringIO())


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
    # One drop lands at one moment: a scan's minimum age admits all of its files or none.
    assert len({p.stat().st_mtime for p in files}) == 1
