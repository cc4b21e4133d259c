"""Moving a scan step's marker back, so that its next scan lists again what lies after it:
to a key, or to the first key registered since a time. What it passed over is found (a late
upload below the marker, before the reconciliation comes round); files already registered
are not registered again (a changed one only as the step's ``scan.on_overwrite`` says). A
marker only moves back: moved forward, the keys it passed would never be listed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from batches.ingest.scan import ScanConfigError, ScanOptions
from batches.models import File, ScanState
from bdre.errors import BdreError, Code
from processes.models import Process

KEY_LENGTH = 1024  # ScanState.marker's column


class MarkerRefused(ValueError):
    """Not a marker the step may be given; the message says why (an answer of 400)."""


@dataclass(frozen=True)
class MarkerReset:
    step_id: int
    location: str
    marker: str  # where it stands
    new_marker: str  # where it goes ("": the start of the location)
    registered_after: int  # files after the new marker already registered: not again


def _step(step_id: int) -> Process:
    step = Process.objects.filter(
        pk=step_id, deleted=False, parent__isnull=False, process_type__job_kind="ingest.scan"
    ).first()
    if step is None:
        raise BdreError(Code.INVALID_SUB_PROCESS, f"{step_id} is not a live ingest.scan step")
    return step


def _registered_keys(step: Process, location: str) -> list[tuple[str, datetime]]:
    """The keys of the files the step takes (``scan.include``: a location may be shared with
    another step, which takes others) registered under ``location``, with when each was."""
    prefix = location.rstrip("/") + "/"
    files = File.objects.filter(
        team_id=step.bus_domain.team_id, path__startswith=prefix
    ).values_list("path", "batch__created_ts")
    try:
        takes = ScanOptions.of(step).takes
    except ScanConfigError:  # a step its scan would refuse: every file counts
        return sorted((path[len(prefix) :], ts) for path, ts in files)
    keys = ((path[len(prefix) :], ts) for path, ts in files)
    return sorted((key, ts) for key, ts in keys if takes(key))


def plan_reset(
    step_id: int, *, key: str | None = None, since: datetime | None = None
) -> MarkerReset:
    """Where the marker would go: to ``key``, or just before the first key registered at or
    after ``since``. 400 for neither or both, or a marker moved forward."""
    step = _step(step_id)
    if (key is None) == (since is None):
        raise MarkerRefused("give a key or a time, not both")
    if key is not None and (len(key) > KEY_LENGTH or "\x00" in key):
        raise MarkerRefused(f"a key has at most {KEY_LENGTH} characters, and no NUL")
    state = ScanState.objects.filter(process=step).first()
    if state is None:
        raise BdreError(Code.NO_BATCHES, f"{step.name} has not scanned yet: nothing to list again")
    keys = _registered_keys(step, state.location)
    if key is not None:
        new_marker = key
    else:
        later = [k for k, ts in keys if since is not None and ts >= since]
        # Just before the first key registered since then; nothing since: it stays.
        new_marker = (
            max((k for k, _ in keys if k < min(later)), default="") if later else state.marker
        )
    if new_marker > state.marker:
        raise MarkerRefused(
            f"the marker stands at {state.marker!r}: it only moves back (keys it passed would "
            "never be listed)"
        )
    return MarkerReset(
        step_id=step.pk,
        location=state.location,
        marker=state.marker,
        new_marker=new_marker,
        registered_after=sum(1 for k, _ in keys if k > new_marker),
    )


@transaction.atomic
def reset(step_id: int, *, key: str | None = None, since: datetime | None = None) -> MarkerReset:
    """Move the marker back as :func:`plan_reset` says. The scan state's row is locked, as a
    scan's page registration locks it, so the two never interleave."""
    ScanState.objects.select_for_update().filter(process_id=step_id).first()
    planned = plan_reset(step_id, key=key, since=since)
    ScanState.objects.filter(process_id=step_id).update(marker=planned.new_marker)
    return planned
