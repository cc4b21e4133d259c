"""When the sync runs: the check of what changed since the last one (tables, runs that
ended), its record, the lock that keeps two from running at once, the subprocess that runs
``manage.py sync_catalog`` and the periodic task that calls it. ORM and subprocess; no
Spark in this process."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Min, Q
from django.utils import timezone

from batches.models import CatalogState, HiveTable

if TYPE_CHECKING:
    pass

from batches.catalog.sync import SyncSummary

log = logging.getLogger(__name__)


# --- when it runs: the change check and the periodic task's service -------------------------


@dataclass(frozen=True)
class Mark:
    """What the database says at the start of a sync, recorded when it succeeds: the next
    check compares against it."""

    at: datetime
    tables: str  # a digest of every table's id, team, name and location
    run_watermark: int  # the lowest run id that can still end after ``at``


def tables_digest() -> str:
    rows = HiveTable.objects.order_by("pk").values_list(
        "pk", "team_id", "dbname", "table_name", "location", "type"
    )
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()


def _run_watermark() -> int:
    # A run that ends after now is running now or starts later: its id is at least the
    # oldest running run's, or above the highest id so far. Both are index look-ups, so
    # the check never scans the runs.
    from processes.models import ExecState, InstanceExec

    running = InstanceExec.objects.filter(exec_state_id=ExecState.RUNNING).aggregate(Min("pk"))
    if running["pk__min"] is not None:
        return int(running["pk__min"])
    last = InstanceExec.objects.order_by("-pk").values_list("pk", flat=True).first()
    return (last or 0) + 1


def mark() -> Mark:
    return Mark(at=timezone.now(), tables=tables_digest(), run_watermark=_run_watermark())


def state() -> CatalogState:
    found, _ = CatalogState.objects.get_or_create(pk=1)
    return found


def record_sync(started: Mark, summary: SyncSummary) -> None:
    CatalogState.objects.update_or_create(
        pk=1,
        defaults={
            "synced_at": started.at,
            "tables_digest": started.tables,
            "run_watermark": started.run_watermark,
            "summary": summary.lines(),
            "error": "",
        },
    )


def record_failure(error: str) -> None:
    CatalogState.objects.update_or_create(pk=1, defaults={"error": error[-4000:]})


def why_sync() -> str | None:
    """Why the catalog needs a sync now, or None: never synced, a table registered, moved or
    deleted, a step run that wrote a partition ended since, or the last sync is older than
    ``BDRE_CATALOG_RESYNC_SECONDS`` (a folder removed outside BDRE leaves no trace in the
    database). A cheap database check: the periodic task runs it every tick."""
    from processes.models import InstanceExec

    current = state()
    if current.synced_at is None:
        # Nothing to publish yet: no JVM for an empty catalog.
        return "never synced" if HiveTable.objects.exists() else None
    if current.tables_digest != tables_digest():
        return "tables registered, moved or deleted"
    wrote = (
        InstanceExec.objects.filter(pk__gte=current.run_watermark, end_ts__gte=current.synced_at)
        .exclude(outputs=[])
        .exists()
    )
    if wrote:
        return "step runs wrote partitions"
    if timezone.now() - current.synced_at > timedelta(seconds=settings.BDRE_CATALOG_RESYNC_SECONDS):
        return f"last sync more than {settings.BDRE_CATALOG_RESYNC_SECONDS} s ago"
    return None


def _claim(seconds: int) -> bool:
    # One sync at a time, across workers and hosts: an embedded Derby metastore admits one
    # JVM, and two syncs would race on the same DDL. A lease, so that a killed sync does not
    # hold it for ever.
    now = timezone.now()
    state()
    return bool(
        CatalogState.objects.filter(Q(running_until__isnull=True) | Q(running_until__lt=now))
        .filter(pk=1)
        .update(running_until=now + timedelta(seconds=seconds))
    )


def _release() -> None:
    CatalogState.objects.filter(pk=1).update(running_until=None)


# The sync's subprocess ends after this long (a lease as long, plus a margin).
SYNC_TIMEOUT_SECONDS = 900


def sync_command() -> list[str]:
    # python -m django needs no manage.py on disk (the image holds the installed package).
    return [sys.executable, "-m", "django", "sync_catalog"]


@dataclass(frozen=True)
class Outcome:
    ran: bool
    reason: str
    output: str = ""


def sync_if_changed(*, force: bool = False) -> Outcome:
    """The periodic task's service: when :func:`why_sync` says so (or ``force``), run
    ``manage.py sync_catalog`` in a process of its own, which starts its session, syncs and
    exits (so its JVM never holds an embedded metastore between syncs)."""
    if not settings.BDRE_CATALOG:
        return Outcome(False, "BDRE_CATALOG is off")
    reason = "forced" if force else why_sync()
    if reason is None:
        return Outcome(False, "nothing changed since the last sync")
    if not _claim(SYNC_TIMEOUT_SECONDS + 60):
        return Outcome(False, "another sync is running")
    try:
        env = {"DJANGO_SETTINGS_MODULE": "bdre.settings", **os.environ}
        done = subprocess.run(
            sync_command(),
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=SYNC_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        record_failure(f"sync_catalog did not end in {SYNC_TIMEOUT_SECONDS} s")
        raise
    finally:
        _release()
    if done.returncode != 0:
        error = (done.stderr or done.stdout)[-4000:]
        record_failure(error)
        raise RuntimeError(f"sync_catalog failed ({reason}): {error}")
    return Outcome(True, reason, done.stdout)


SYNC_TASK = "batches.tasks.sync_catalog"
SYNC_SCHEDULE_NAME = "bdre: sync the published catalog"


def ensure_sync_schedule() -> None:
    """Beat's periodic check (``BDRE_CATALOG_SYNC_SECONDS``) on the default queue: the sync
    is a process of its own, so it holds none of the Spark queue's slots (one Spark step
    each) while it runs. Disabled when ``BDRE_CATALOG`` is off. Idempotent."""
    from bdre.beat import ensure_interval_task

    ensure_interval_task(
        SYNC_SCHEDULE_NAME,
        SYNC_TASK,
        settings.BDRE_CATALOG_SYNC_SECONDS,
        queue=settings.BDRE_QUEUE,
        enabled=settings.BDRE_CATALOG,
    )
