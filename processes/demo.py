"""The demo installation: a user, a team, an application, a registered pipeline with its
schedules, and a landing folder of sample enriched-event files.

``set_up_demo`` is idempotent: running it again keeps what exists and creates what is
missing. The ingest job runs every ``DEMO_SCAN_SECONDS``; the shred job runs as soon as the
ingest job queued files for it, and the daily summary as soon as the shred job queued a batch
once a day is closed: the shred marks each batch with the days of its events, and the first
batch of a later day closes the days before it (``EOD@<day>``, the daily step's cut pattern),
so that the summary has one row a day.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from batches.locations import team_landing
from bdre.models import Membership, Role
from processes import demo_pipelines, schedules
from processes.demo_pipelines import DAILY_QUERY, DEMO_APPLICATION
from processes.models import (
    BusDomain,
    ExecState,
    InstanceExec,
    Process,
    ProcessTypeId,
    Property,
)
from processes.registry import JobSpec, StepSpec, register_pipeline
from processes.sample_events import EventFactory

DEMO_USERNAME = "demo"
DEMO_SUPERUSER = "demo-admin"
DEMO_TEAM = "demo-team"
DEMO_SCAN_SECONDS = 20
# The day of the first sample events: fixed, so that every run of the demo (on local[2], on
# a cluster, through Connect) writes the same rows.
FIRST_DAY = date(2026, 11, 20)
DAY_START = dt_time(8, 0)


@dataclass
class DemoSetup:
    username: str
    password: str | None  # None when the user existed already (password unchanged)
    team: Group
    application: BusDomain
    jobs: list[Process]  # every job, upstream before downstream
    superuser: str = DEMO_SUPERUSER
    superuser_password: str | None = None  # None when the superuser existed already

    def job(self, name: str) -> Process:
        return next(j for j in self.jobs if j.name == name)

    @property
    def ingest(self) -> Process:
        return self.job("clickstream_ingest")

    @property
    def shred(self) -> Process:
        return self.job("clickstream_shred")

    @property
    def daily(self) -> Process:
        return self.job("clickstream_daily")

    @property
    def export(self) -> Process:
        return self.job("clickstream_daily_export")

    @property
    def pages_ingest(self) -> Process:
        return self.job("clickstream_pages_ingest")

    @property
    def pages(self) -> Process:
        return self.job("clickstream_pages")


def _user(username: str, *, superuser: bool) -> tuple[User, str | None]:
    """The user, created with a new random password (returned once), or as it is."""
    UserModel = get_user_model()
    user = UserModel.objects.filter(username=username).first()
    if user is not None:
        if user.is_superuser != superuser:
            # The demo's team member must see what a team sees: never everything.
            UserModel.objects.filter(pk=user.pk).update(is_superuser=superuser, is_staff=superuser)
        return user, None
    password = secrets.token_urlsafe(12)
    create = UserModel.objects.create_superuser if superuser else UserModel.objects.create_user
    return create(username, f"{username}@example.com", password), password


@transaction.atomic
def set_up_demo(*, scan_seconds: int | None = None) -> DemoSetup:
    """``scan_seconds`` sets the scans' timer (an existing one is kept when it is None; a
    new one is ``DEMO_SCAN_SECONDS``)."""
    # The demo's login is an admin of its team, not a superuser, so the pages show what a
    # team sees; the installation's superuser (Django admin, storage grants) is another one.
    user, password = _user(DEMO_USERNAME, superuser=False)
    _superuser, superuser_password = _user(DEMO_SUPERUSER, superuser=True)
    team, _ = Group.objects.get_or_create(name=DEMO_TEAM)
    Membership.objects.get_or_create(user=user, team=team, defaults={"role": Role.ADMIN})
    application, _ = BusDomain.objects.get_or_create(
        name=DEMO_APPLICATION,
        team=team,
        defaults={
            "owner": DEMO_USERNAME,
            "description": "Snowplow enriched events from the web site, shredded and "
            "deduplicated, summarised per day; the shop's page list, loaded and cleansed.",
        },
    )
    pipeline = demo_pipelines.documents(
        landing=landing_folder(team).as_uri(),
        exports=export_folder(team).as_uri(),
        scan_seconds=scan_seconds or DEMO_SCAN_SECONDS,
    )
    jobs = _demo_jobs(application, pipeline)
    by_name = {job.name: job for job in jobs}
    _bring_up_to_date(by_name)
    _schedule(jobs, pipeline, keep_timers=scan_seconds is None)
    return DemoSetup(
        DEMO_USERNAME,
        password,
        team,
        application,
        jobs,
        superuser_password=superuser_password,
    )


def _demo_jobs(application: BusDomain, pipeline: list[dict[str, Any]]) -> list[Process]:
    """The demo's jobs, upstream before downstream: each registered from its document
    through the import service (``register_pipeline``, as ``import_job`` and the API's
    import call it) unless it exists."""
    types = {t.label: t.value for t in ProcessTypeId}
    jobs: dict[str, Process] = {}
    for document in pipeline:
        name = document["name"]
        existing = Process.objects.live().jobs().filter(bus_domain=application, name=name).first()
        if existing is not None:
            jobs[name] = existing
            continue
        steps = [
            StepSpec(
                name=step["name"],
                process_type_id=types[step["process_type"]],
                description=step["description"],
                can_recover=step["can_recover"],
                upstream=[jobs[upstream].pk for upstream in step["upstream"]],
                batch_cut_pattern=step["batch_cut_pattern"],
                next=step["next"],
                properties=step["properties"],
            )
            for step in document["steps"]
        ]
        jobs[name] = register_pipeline(
            JobSpec(
                name=name,
                bus_domain=application,
                process_type_id=types[document["process_type"]],
                steps=steps,
                description=document["description"],
                properties=document["properties"],
                max_retries=document["max_retries"],
                lease_seconds=document["lease_seconds"],
                schedule=schedules.Schedule(**document["schedule"]),
            )
        )
    return list(jobs.values())


def _bring_up_to_date(jobs: dict[str, Process]) -> None:
    """What an installation set up by an earlier demo lacks."""
    ingest, shred, daily = (
        jobs["clickstream_ingest"],
        jobs["clickstream_shred"],
        jobs["clickstream_daily"],
    )
    # An installation set up before the page list shares the folder: its scan keeps to the
    # event files from now on.
    Property.objects.get_or_create(
        process=ingest.steps.get(),
        config_group="scan",
        key="include",
        defaults={"value": "*.tsv", "description": "the event files; pages-*.csv is not"},
    )
    # An installation set up before the daily query read only its own batches: it counted
    # every shred batch again in each daily batch.
    Property.objects.filter(process__parent=daily, config_group="sql", key="query").exclude(
        value__contains="{batch_ids}"
    ).update(value=DAILY_QUERY)
    # An installation set up before expectations: the demo's own.
    for job in jobs.values():
        for step in job.steps.filter(name__in=demo_pipelines.EXPECTATIONS):
            for key, value in demo_pipelines.EXPECTATIONS[step.name].items():
                Property.objects.get_or_create(
                    process=step, config_group="expect", key=key, defaults={"value": value}
                )
    # An installation set up before days were closed marked every shred batch EOD: the
    # daily step wrote a row for each batch, several a day.
    Property.objects.filter(
        process=shred, config_group="run", key="batch_marking", value="EOD"
    ).delete()
    Property.objects.get_or_create(
        process=shred,
        config_group="run",
        key="close_days",
        defaults={
            "value": "on_later_day",
            "description": "the first batch of a later day closes the days before it",
        },
    )


def _schedule(jobs: list[Process], pipeline: list[dict[str, Any]], *, keep_timers: bool) -> None:
    """Each job's schedule as its document says: the scans on a timer (an existing timer is
    kept when ``keep_timers``), every other job after its upstream."""
    for job, document in zip(jobs, pipeline, strict=True):
        wanted = document["schedule"]
        if wanted.get(demo_pipelines.TIMER_KEY):
            if not keep_timers or not schedules.schedule_of(job.pk).is_timed:
                every = wanted[demo_pipelines.TIMER_KEY]
                schedules.set_schedule(job.pk, schedules.Schedule(every_seconds=every))
        elif wanted.get("on_upstream") and not schedules.runs_on_upstream(job.pk):
            schedules.set_schedule(job.pk, schedules.Schedule(on_upstream=True))


def export_folder(team: Group) -> Path:
    """Where the demo's export writes its CSV files: the team's own warehouse folder."""
    return Path(settings.BDRE_WAREHOUSE) / f"team-{team.pk}" / "exports" / "daily_page_views"


def landing_folder(team: Group) -> Path:
    """The demo team's own landing folder, inside the storage every team is granted."""
    return team_landing(team.pk)


def generate_landing(
    folder: Path,
    *,
    files: int = 3,
    events: int = 2000,
    seed: int = 8,
    day: date = FIRST_DAY,
    repeat_from: list[dict[str, str]] | None = None,
    in_flight: bool = True,
) -> tuple[list[Path], list[dict[str, str]]]:
    """Sample files of ``day``'s events, from 08:00 on (the collector's time, in UTC; a
    repeated event keeps its own): ``files`` batches of ``events`` events with natural and synthetic
    duplicates, bad lines and null fingerprints; each repeats 5 % of ``repeat_from`` (events
    an earlier run has seen: cross-batch natural duplicates) and reuses the ids of 1 % of
    them with other payloads (cross-batch synthetic duplicates); and, with ``in_flight``, one
    file still being written (``_current``). Names carry the time, so files generated later
    sort after these and the scan picks them up next. Returns the files and their unique
    events."""
    folder.mkdir(parents=True, exist_ok=True)
    factory = EventFactory(
        seed=seed + len(list(folder.iterdir())), start=datetime.combine(day, DAY_START, UTC)
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    written: list[Path] = []
    seen: list[dict[str, str]] = []
    for i in range(files):
        lines, unique = factory.batch(
            events,
            natural=0.02,
            synthetic=0.005,
            malformed=0.01,
            null_fingerprint=0.02,
            repeat_from=repeat_from,
            repeat=0.05 if repeat_from else 0.0,
            repeat_synthetic=0.01 if repeat_from else 0.0,
        )
        seen += unique
        written.append(_write(folder / f"events-{stamp}-{i + 1:02d}.tsv", lines))
    if in_flight:
        lines, _ = factory.batch(events // 4)
        written.append(_write(folder / f"events-{stamp}-99.tsv_current", lines))
    # One drop, one moment: a scan's minimum age then admits all of its files or none, so
    # the first two files are one scan's batches however the timer falls.
    landed = time.time()
    for path in written:
        os.utime(path, (landed, landed))
    return written, seen


SECTIONS = ("tv", "audio", "phones", "computers", "cameras")


def generate_pages(folder: Path, *, pages: int = 60) -> Path:
    """The shop's page list (``pages-<time>.csv``: page_url, section, price), the same rows
    every time, with four rows the cleanse refuses (no section, not https, a price that is
    no number, no URL)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["page_url,section,price"]
    for i in range(pages):
        lines.append(f"https://shop.example/p/{i},{SECTIONS[i % len(SECTIONS)]},{10 + i * 7.5}")
    lines += [
        "https://shop.example/p/900,,19.99",
        "http://shop.example/p/901,tv,5",
        "https://shop.example/p/902,audio,free",
        ",phones,12",
    ]
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    return _write(folder / f"pages-{stamp}.csv", lines)


def _write(path: Path, lines: list[str]) -> Path:
    partial = path.with_name("_" + path.name)  # "_" names are in flight for the scan
    partial.write_text("\n".join(lines) + "\n")
    partial.rename(path)
    return path


@dataclass
class DemoSummary:
    files: int
    batches: int
    runs: dict[str, str]  # job -> state of its last finished run
    run_count: int  # the pipeline's runs, every job's
    scan_runs: int  # the ingest job's runs: each one registered files
    empty_scan_runs: int  # ingest runs whose scan registered nothing (heartbeats)
    quiet_checks: int  # the schedule's ticks that found nothing new: no run, no batch
    counters: dict[str, int]  # the shred step's counters, summed over its runs
    tables: list[str]
    catalog: list[str]  # the tables' names in the published catalog
    pages: dict[str, int]  # the page list's cleanse counters, summed over its runs
    exported: dict[str, int]  # the export step's counters, summed over its runs
    export_folder: str
    expectations: list[str]  # each rule with its counts, summed over its runs
    closed_days: list[str]  # the days the daily summary summed, one row each
    open_days: list[str]  # days whose batches wait for the day to close

    def lines(self) -> list[str]:
        c = self.counters
        out = [
            f"  files registered:    {self.files}",
            f"  batches:             {self.batches}",
            f"  runs:                {self.run_count}",
            f"  ingest runs:         {self.scan_runs}",
            f"  empty ingest runs:   {self.empty_scan_runs}",
            f"  quiet checks:        {self.quiet_checks}",
            *(f"  last finished run of {job}: {state}" for job, state in self.runs.items()),
            f"  events in:           {c.get('rows_in', 0)}",
            f"  events out:          {c.get('rows_out', 0)}",
            f"  bad rows:            {c.get('bad_rows', 0)}",
        ]
        out += [
            f"  duplicates, {name.removeprefix('dup_').replace('_', ' ')}: {value}"
            for name, value in c.items()
            if name.startswith("dup_")
        ]
        natural = c.get("dup_in_batch_natural", 0), c.get("dup_cross_batch_natural", 0)
        synthetic = c.get("dup_in_batch_synthetic", 0), c.get("dup_cross_batch_synthetic", 0)
        out += [
            "  how they add up:     events in = events out + bad rows + natural duplicates "
            "(in batch, cross batch)",
            f"                       {c.get('rows_in', 0)} = {c.get('rows_out', 0)} + "
            f"{c.get('bad_rows', 0)} + {natural[0]} + {natural[1]}",
            f"                       the {synthetic[0]} in-batch and {synthetic[1]} cross-batch "
            "synthetic duplicates (the same id, another event) are not removed: they are kept "
            "in events out under new ids, each with a duplicate context naming its original id",
        ]
        out += [
            f"  page list rows:      {self.pages.get('rows_in', 0)}",
            f"  valid page rows:     {self.pages.get('rows_out', 0)}",
            f"  invalid page rows:   {self.pages.get('bad_rows', 0)}",
            "                       (in default.pages, and default.pages_invalid with the "
            "reason of each)",
            "  expectations:        (docs/quality.md: checked on each batch before it is "
            "published)",
            *(f"    {line}" for line in self.expectations),
            f"  days summed:         {', '.join(self.closed_days) or 'none yet'}",
            "                       (one row a day in default.daily_page_views, once the day "
            "is closed: by the first batch of a later day)",
            f"  days still open:     {', '.join(self.open_days) or 'none'}",
            f"  rows exported:       {self.exported.get('rows_out', 0)}",
            f"                       (CSV files in {self.export_folder})",
        ]
        out.append(f"  tables written:      {', '.join(self.tables) or 'none yet'}")
        if self.catalog:
            # Beat's periodic sync publishes them (docs/operations.md, "The catalog").
            out.append(f"  in the catalog as:   {', '.join(self.catalog)}")
            out.append(
                "                       (published by Beat's periodic sync; now: manage.py "
                "sync_catalog; a notebook's session: manage.py sync_catalog --print-conf)"
            )
        return out


def summary(setup: DemoSetup) -> DemoSummary:
    from batches import catalog
    from batches.models import Batch, File, HiveTable, ScanState

    app = setup.application
    runs = {}
    for job in setup.jobs:
        # The last finished run: the 20-second scan may well be running at this moment.
        runs_of_job = InstanceExec.objects.filter(process=job)
        last = runs_of_job.exclude(exec_state_id=ExecState.RUNNING).order_by("-id").first()
        runs[job.name] = ExecState(last.exec_state_id).name if last else "not run yet"
        if runs_of_job.filter(exec_state_id=ExecState.RUNNING).exists():
            runs[job.name] += " (and one running now)"
    # A tick of a scan's schedule that finds nothing new is a quiet check, not a run
    # (docs/operations.md, "Quiet scans"): every ingest run is one that registered files.
    scanning = [setup.ingest, setup.pages_ingest]
    scan_runs = InstanceExec.objects.filter(
        process__parent__in=scanning, exec_state_id=ExecState.SUCCESS
    ).values_list("counters", flat=True)
    return DemoSummary(
        files=File.objects.filter(batch__bus_domain=app).count(),
        batches=Batch.objects.filter(bus_domain=app).count(),
        runs=runs,
        run_count=InstanceExec.objects.filter(process__in=setup.jobs).count(),
        scan_runs=len(scan_runs),
        empty_scan_runs=sum(1 for c in scan_runs if not c.get("registered")),
        quiet_checks=sum(
            ScanState.objects.filter(process__parent__in=scanning).values_list(
                "quiet_checks", flat=True
            )
        ),
        counters=_summed(setup.shred.steps.get()),
        tables=sorted(
            f"{t.dbname}.{t.table_name}" for t in HiveTable.objects.filter(bus_domain=app)
        ),
        catalog=sorted(
            catalog.catalog_name(t)
            for t in HiveTable.objects.filter(bus_domain=app)
            if settings.BDRE_CATALOG
        ),
        pages=_summed(setup.pages.steps.get(name="clickstream_pages_cleanse")),
        exported=_summed(setup.export.steps.get()),
        export_folder=str(export_folder(setup.team)),
        expectations=_expectations(setup),
        **_days(setup.daily.steps.get()),
    )


def _expectations(setup: DemoSetup) -> list[str]:
    """Each expectation of the demo's steps, with its rows checked and failed over the
    step's runs."""
    declared: dict[tuple[str, str], str] = {}  # (step, table.rule) -> the rule
    totals: dict[tuple[str, str], list[int]] = {}  # -> [checked, failed]
    for step in Process.objects.filter(parent__in=setup.jobs, deleted=False).order_by("id"):
        for key, value in step.properties.filter(config_group="expect").values_list("key", "value"):
            declared[(step.name, key)] = value
            totals[(step.name, key)] = [0, 0]
        runs = InstanceExec.objects.filter(process=step).exclude(exec_state_id=ExecState.RUNNING)
        for checks in runs.values_list("checks", flat=True):
            for result in checks:
                counted = totals.get((step.name, f"{result['table']}.{result['rule']}"))
                if counted is not None:
                    counted[0] += result["checked"]
                    counted[1] += result["failed"]
    return [
        f"{key} ({declared[(step, key)]}): {checked} row{'s' * (checked != 1)} checked, "
        f"{failed} failed"
        for (step, key), (checked, failed) in totals.items()
    ]


def _days(daily: Process) -> dict[str, list[str]]:
    """The days the daily step claimed closed (``EOD@<day>``), and those its queued batches
    hold, still open."""
    from batches.models import ArchiveConsumpQueue, BatchConsumpQueue

    closed = _days_marked(ArchiveConsumpQueue.objects.filter(process=daily), closing=True)
    held = _days_marked(BatchConsumpQueue.objects.filter(process=daily), closing=False)
    return {"closed_days": sorted(closed), "open_days": sorted(held - closed)}


def _days_marked(rows: QuerySet[Any], *, closing: bool) -> set[str]:
    """The days of the rows' marking elements that close a day (or that do not)."""
    from batches import markings

    return {
        markings.date_of(element)
        for marking in rows.values_list("batch_marking", flat=True)
        for element in markings.elements(marking)
        if markings.closes_a_day(element) == closing
    }


def _summed(step: Process) -> dict[str, int]:
    """A step's counters, summed over its successful runs."""
    totals: dict[str, int] = {}
    for counters in InstanceExec.objects.filter(
        process=step, exec_state_id=ExecState.SUCCESS
    ).values_list("counters", flat=True):
        for key, value in counters.items():
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    return totals


def day_of_next_drop(setup: DemoSetup) -> date:
    """The day of the events the demo drops next: its first day, then, for each day the
    pipeline closed and exported, the next one (the open day's events continue)."""
    return FIRST_DAY + timedelta(days=passes_done(setup))


def shredded(setup: DemoSetup, files: list[Path]) -> bool:
    """Whether the event files landed (``_current`` ones left out: they are being written)
    are registered, and shredded: no batch waits for the shred."""
    from batches.models import BatchConsumpQueue, File

    names = [f.name for f in files if not f.name.endswith("_current")]
    registered = sum(
        File.objects.filter(batch__bus_domain=setup.application, path__endswith=name).exists()
        for name in names
    )
    waiting = BatchConsumpQueue.objects.filter(process__parent=setup.shred).exists()
    return registered == len(names) and not waiting


def passes_done(setup: DemoSetup) -> int:
    """How many times the events went through the pipeline, to its export."""
    return InstanceExec.objects.filter(
        process=setup.export, exec_state_id=ExecState.SUCCESS
    ).count()


def pages_loaded(setup: DemoSetup) -> bool:
    """Whether the page list's own branch (one file) went through."""
    return InstanceExec.objects.filter(
        process=setup.pages, exec_state_id=ExecState.SUCCESS
    ).exists()
