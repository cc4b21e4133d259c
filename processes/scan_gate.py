"""Quiet scans: a run of an ingesting job starts only when its scan has something to register.

A job whose first steps all scan a location (``ingest.scan``) and that consumes no upstream
is checked before each run that a schedule, an upstream job or "run now" asks for: its
locations are listed as the scan would list them, registering nothing and moving no marker
(``batches.ingest.scan.check``). Nothing new: no run, no batch; the check is kept on the scan
state (``last_checked_ts``, ``last_check``) and counted (``quiet_checks``). Something new: the
run starts and its scan lists again and registers, so a file that lands after the check's
listing is the run's or the next check's, never lost.

Two triggers at once: the check notes the job's latest run before it lists, and the run is
started under the job's row lock only if no run started since (the lock ``init_job`` takes,
so the second trigger sees the first one's run and stands down; init_job's 104 covers a run
still going). A job whose latest run failed is re-run without a check: its claim is kept,
and its failure should be retried, not hidden. A check that fails (a broken location) starts
the run too, so the failure is recorded on a run where users look for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from batches.ingest.scan import CheckResult, check, record_check
from batches.models import ScanState
from bdre.errors import BdreError, Code
from processes import orchestrator, schedules
from processes.models import ExecState, InstanceExec, Process
from processes.workflow import predecessors, steps_in_order

log = logging.getLogger(__name__)

SCAN_KIND = "ingest.scan"
NOTHING_NEW = "nothing_new"
STARTED = "started"
RAN_MEANWHILE = "ran_meanwhile"


@dataclass
class Quiet:
    """A check that started no run: nothing new, or another trigger's run started meanwhile
    (``run_id``)."""

    job_id: int
    outcome: str
    detail: str
    checked_at: datetime
    run_id: int | None = None
    last_checked: dict[str, Any] | None = None  # ``last_checked`` of the job, this check's


def gating_scans(job: Process) -> list[Process]:
    """The scan steps a run of the job is checked against: its first steps when every one
    of them is an ``ingest.scan`` and no step of the job consumes an upstream (that input
    would wait for a file); none otherwise (the job always runs)."""
    steps = steps_in_order(job)
    if not steps:
        return []
    if Process.enqueuing_processes.through.objects.filter(
        from_process_id__in=[s.pk for s in steps]
    ).exists():
        return []
    before = predecessors(steps)
    first = [s for s in steps if not before[s.pk]]
    kinds = {s.pk: s.process_type.job_kind for s in first}
    return first if all(kind == SCAN_KIND for kind in kinds.values()) else []


def start(
    job_id: int, *, max_batch: int | None = None, worker: str | None = None, **options: Any
) -> orchestrator.Started | Quiet:
    """Start a run of the job as ``orchestrator.start`` does (``options`` are its own),
    unless the job's scans have nothing new (a ``Quiet`` answer then). Raises the
    lifecycle's BdreError (104 when a run is going)."""
    job = Process.objects.select_related("process_type").get(pk=job_id)
    scans = gating_scans(job)
    # A paused job's run is init_job's to refuse (116) or, forced, to start: its storage is
    # not listed for a run that may not start.
    if not scans or schedules.is_paused(job_id):
        return orchestrator.start(job_id, max_batch=max_batch, worker=worker, **options)
    latest = (
        InstanceExec.objects.filter(process_id=job_id)
        .order_by("-id")
        .values_list("pk", "exec_state_id")
        .first()
    )
    if latest is not None and latest[1] == ExecState.RUNNING:
        raise BdreError(Code.PARENT_ALREADY_RUNNING, f"{job.name} ({job.pk})")
    if latest is not None and latest[1] in ExecState.failed():
        return orchestrator.start(job_id, max_batch=max_batch, worker=worker, **options)
    watermark = latest[0] if latest is not None else 0
    try:
        found = [check(s.pk) for s in scans]
    except Exception as exc:  # the scan fails the same way: on a run, where it is seen
        log.warning("check of %s failed, running it to record why: %s", job.name, exc)
        return orchestrator.start(job_id, max_batch=max_batch, worker=worker, **options)
    if not any(f.new for f in found):
        return _quiet(job, found, NOTHING_NEW, _nothing_new(found), None)
    with transaction.atomic():
        Process.objects.select_for_update(no_key=True).filter(pk=job_id).first()  # init_job's lock
        meanwhile = (
            InstanceExec.objects.filter(process_id=job_id, pk__gt=watermark)
            .order_by("id")
            .values_list("pk", flat=True)
            .first()
        )
        if meanwhile is not None:
            detail = f"run {meanwhile} started meanwhile: no second run"
            return _quiet(job, found, RAN_MEANWHILE, detail, meanwhile, counted=False)
        started = orchestrator.start(job_id, max_batch=max_batch, worker=worker, **options)
        new = sum(f.new for f in found)
        record_check(
            found,
            outcome=STARTED,
            detail=f"new files (at least {new}): run {started.instance_exec_id} started",
            run_id=started.instance_exec_id,
            quiet=False,
        )
        return started


# Why a scan passes a key over this time (its counters), as a person reads it.
NOT_READY = {
    "skipped_young": "younger than the scan's minimum age",
    "skipped_in_flight": "still being written",
    "skipped_empty": "empty",
    "skipped_unsafe": "with a name the scan refuses",
}


def _nothing_new(found: list[CheckResult]) -> str:
    listed = sum(f.listed for f in found)
    waiting = sum(f.not_ready for f in found)
    text = f"nothing new: {listed} key{'' if listed == 1 else 's'} listed"
    if not waiting:
        return text
    why: dict[str, int] = {}
    for f in found:
        for reason, n in f.why_not_ready.items():
            words = NOT_READY.get(reason, "not files of the folder's own")
            why[words] = why.get(words, 0) + n
    ready = min((f.ready_at for f in found if f.ready_at), default="")
    said = []
    for words, n in why.items():
        if words == NOT_READY["skipped_young"] and ready:
            words += f", the first ready at {datetime.fromisoformat(ready):%H:%M:%S} UTC"
        said.append(f"{n} {words}")
    return f"{text}, {waiting} not ready yet" + (f" ({'; '.join(said)})" if said else "")


def _quiet(
    job: Process,
    found: list[CheckResult],
    outcome: str,
    detail: str,
    run_id: int | None,
    *,
    counted: bool = True,
) -> Quiet:
    # A check that stood down for another trigger's run is not a listing of its own for the
    # reconciliation cadence: that run's scan counts.
    record_check(found, outcome=outcome, detail=detail, run_id=run_id, quiet=counted)
    return Quiet(
        job_id=job.pk,
        outcome=outcome,
        detail=detail,
        checked_at=timezone.now(),
        run_id=run_id,
        last_checked=last_checked(job),
    )


def last_checked(job: Process) -> dict[str, Any] | None:
    """The job's last check, for its page and the API: when, what came of it (outcome,
    detail, the run it started or found), how many checks started no run, and per scan step
    what was listed. None for a job that is not checked or was never checked."""
    scans = gating_scans(job) if job.parent_id is None else []
    states = list(
        ScanState.objects.filter(process__in=scans, last_checked_ts__isnull=False)
        .select_related("process")
        .order_by("-last_checked_ts")
    )
    if not states:
        return None
    latest = states[0].last_check
    return {
        "checked_at": states[0].last_checked_ts,
        "outcome": latest.get("outcome", ""),
        "detail": latest.get("detail", ""),
        "run": latest.get("run"),
        "quiet_checks": states[0].quiet_checks,
        "steps": [
            {
                "step": s.process.name,
                "checked_at": s.last_checked_ts,
                **{k: s.last_check.get(k) for k in LISTED_KEYS},
            }
            for s in states
        ],
    }


LISTED_KEYS = ("location", "after", "listed", "list_calls", "new", "not_ready", "reconciled")
