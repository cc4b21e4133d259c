"""Backfill, rewind, reprocess and catch-up as named, tracked operations (docs/operations.md,
"Operations"): each start records an ``Operation`` (what was asked, its plan as it was
started, who, when) in the transaction that puts its batches back or queues them, and its
progress is read from the runs and queue rows of those batches since then.

A catch-up gives a job (a new one, say, added downstream of a job that delivered batches
before it existed) the batches its upstream jobs delivered from a day on, as NEW rows of
its consuming steps, exactly as the upstream's runs would have queued them: nothing it
consumed or waits for already, so nothing twice. A rewind of a step that consumed nothing
yet answers 112; a catch-up is what such a job needs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from batches import markings
from batches import queue as batch_queue
from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState, File
from bdre.errors import BdreError, Code
from processes import days, lifecycle
from processes.models import ExecState, InstanceExec, Operation, Process, Property

Kind = Operation.Kind

# What a batch of an operation is doing, in the order a page lists them.
WAITING, RUNNING, FAILED, DONE = "waiting", "running", "failed", "done"


@dataclass(frozen=True)
class Step:
    """One batch of an operation and where it stands."""

    job_id: int
    job: str
    batch_id: int  # the batch built again; for a catch-up, the upstream batch queued
    level: int  # hops downstream of what was asked for
    state: str
    run_id: int | None  # the latest run of it since the operation started
    error: str = ""


@dataclass(frozen=True)
class Progress:
    operation: Operation
    steps: list[Step] = field(default_factory=list)

    def count(self, state: str) -> int:
        return sum(1 for s in self.steps if s.state == state)

    @property
    def done(self) -> int:
        return self.count(DONE)

    @property
    def failed(self) -> int:
        return self.count(FAILED)

    @property
    def total(self) -> int:
        return len(self.steps)

    @property
    def finished(self) -> bool:
        return self.done == self.total

    @property
    def percent(self) -> int:
        return 100 if not self.total else self.done * 100 // self.total

    @property
    def summary(self) -> str:
        counts = [f"{self.count(s)} {s}" for s in (RUNNING, FAILED, WAITING) if self.count(s)]
        return f"{self.done} of {self.total} done" + (f" · {' · '.join(counts)}" if counts else "")


def record(
    *,
    kind: str,
    job: Process,
    plan: list[dict[str, Any]],
    asked: dict[str, Any],
    name: str = "",
    by: Any = None,
    rows: int = 0,
) -> Operation:
    """The operation, in the caller's transaction (the one that puts its batches back)."""
    return Operation.objects.create(
        bus_domain_id=job.bus_domain_id,
        kind=kind,
        name=(name.strip() or describe(kind, job, asked))[:200],
        asked=asked,
        plan=plan,
        rows_put_back=rows,
        created_by=by if getattr(by, "is_authenticated", False) else None,
    )


def describe(kind: str, job: Process, asked: dict[str, Any]) -> str:
    """An operation's name when its user gave none: what was asked, in words."""
    what = {
        Kind.BACKFILL: f"backfill of {job.name}",
        Kind.REWIND: f"rewind of {job.name}",
        Kind.REPROCESS: f"reprocess of {job.name}",
        Kind.CATCH_UP: f"catch-up of {job.name}",
    }[Kind(kind)]
    details = []
    if asked.get("since") or asked.get("until"):
        days = [d for d in (asked.get("since"), asked.get("until")) if d]
        details.append(" to ".join(dict.fromkeys(days)))
    for key, said in (("file", "file"), ("label_of_input", "input labelled"), ("batch", "batch")):
        if asked.get(key) not in (None, ""):
            details.append(f"{said} {asked[key]}")
    if asked.get("from_day"):
        details.append(f"from {asked['from_day']}")
    return what + (f": {', '.join(details)}" if details else "")


def progress(operation: Operation) -> Progress:
    """Where each batch of ``operation`` stands: a rebuilt batch by the latest run of its job
    that built it since the operation started; a caught-up one by its queue row."""
    if operation.kind == Kind.CATCH_UP:
        return Progress(operation, _caught_up(operation))
    targets = [int(r["target_batch_id"]) for r in operation.plan]
    latest: dict[int, InstanceExec] = {}
    for since in InstanceExec.objects.filter(
        parent__isnull=True, target_batch_id__in=targets, start_ts__gte=operation.created_at
    ).order_by("id"):
        assert since.target_batch_id is not None  # filtered on it
        latest[since.target_batch_id] = since
    steps = []
    for rebuild in operation.plan:
        run = latest.get(int(rebuild["target_batch_id"]))
        steps.append(
            Step(
                job_id=rebuild["job_id"],
                job=rebuild["job"],
                batch_id=rebuild["target_batch_id"],
                level=rebuild.get("level", 0),
                state=_state(run),
                run_id=run.pk if run else None,
                error=(run.error if run and run.exec_state_id in ExecState.failed() else "")[:300],
            )
        )
    return Progress(operation, steps)


def _state(run: InstanceExec | None) -> str:
    if run is None:
        return WAITING
    if run.exec_state_id == ExecState.SUCCESS:
        return DONE
    if run.exec_state_id in ExecState.failed():
        return FAILED
    return RUNNING


def _caught_up(operation: Operation) -> list[Step]:
    """Each queued batch by its row: waiting (NEW), being built (ACCESSED), failed or in
    the dead letter, or consumed (archived: done, with the run that consumed it)."""
    steps = []
    for entry in operation.plan:
        step_id, batch_id = int(entry["step_id"]), int(entry["batch_id"])
        archived = (
            ArchiveConsumpQueue.objects.filter(process_id=step_id, source_batch_id=batch_id)
            .order_by("-id")
            .values_list("claimed_by_id", flat=True)
            .first()
        )
        live = (
            BatchConsumpQueue.objects.filter(process_id=step_id, source_batch_id=batch_id)
            .order_by("-id")
            .values_list("batch_state_id", "claimed_by_id", "last_error")
            .first()
        )
        if live is not None:
            row_state, run_id, error = live
            moving = {int(BatchState.NEW): WAITING, int(BatchState.ACCESSED): RUNNING}
            state = moving.get(
                int(row_state), RUNNING if row_state == BatchState.PROCESSED else FAILED
            )
        elif archived is not None:
            state, run_id, error = DONE, archived, ""
        else:
            state, run_id, error = FAILED, None, "its queue row is gone"
        steps.append(
            Step(entry["job_id"], entry["job"], batch_id, 0, state, run_id, (error or "")[:300])
        )
    return steps


# --- catch-up --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatchUp:
    """A batch an upstream job delivered, to be queued for one of the job's steps."""

    step_id: int
    step: str
    upstream_id: int
    upstream: str
    batch_id: int
    marking: str
    created: str  # the day the batch was made

    def as_entry(self, job: Process) -> dict[str, Any]:
        return {"job_id": job.pk, "job": job.name, **self.__dict__}


def _batch(catch_up: CatchUp) -> int:
    return catch_up.batch_id


def plan_catch_up(job_id: int, since: date) -> list[CatchUp]:
    """The batches the job's upstream jobs delivered from ``since`` on (the day each was
    made, in the installation's time zone) that its consuming steps have neither consumed nor
    queued. 112 when there are none; 120 when an upstream job is another team's (its batches
    are not this team's to queue, and its name is not this team's to see)."""
    job = Process.objects.get_live_job(job_id)
    found: list[CatchUp] = []
    steps = Process.objects.filter(parent=job, deleted=False).prefetch_related(
        "enqueuing_processes"
    )
    consuming = [s for s in steps.order_by("id") if s.enqueuing_processes.all()]
    if not consuming:
        raise BdreError(Code.NO_BATCHES, f"{job.name} reads no upstream job: nothing to catch up")
    team_id = job.bus_domain.team_id
    for step in consuming:
        taken = set(
            BatchConsumpQueue.objects.filter(process=step).values_list("source_batch_id", flat=True)
        ) | set(
            ArchiveConsumpQueue.objects.filter(process=step).values_list(
                "source_batch_id", flat=True
            )
        )
        upstreams = step.enqueuing_processes.filter(deleted=False).select_related("bus_domain")
        for upstream in upstreams.order_by("id"):
            if upstream.bus_domain.team_id != team_id:
                raise BdreError(
                    Code.OTHER_TEAMS_BATCH,
                    f"{step.name} reads a job of another team: that team's batches are not "
                    "this team's to queue",
                )
            for batch_id, marking, created in _delivered(upstream):
                if batch_id in taken or created < since:
                    continue
                found.append(
                    CatchUp(
                        step.pk, step.name, upstream.pk, upstream.name, batch_id, marking,
                        created.isoformat(),
                    )
                )  # fmt: skip
    if not found:
        raise BdreError(
            Code.NO_BATCHES,
            f"the upstream jobs of {job.name} delivered no batch from {since} on that it has "
            "not consumed or queued already",
        )
    return found


def _delivered(upstream: Process) -> list[tuple[int, str, date]]:
    """The batches ``upstream`` delivered, oldest first, each with the marking it queued it
    with and the day it was made: a scan's file batches (registered under its locations),
    any other job's batches of its runs that ended well. The marking is the one it gave its
    consumers where it has any; else as it would have given it (a file's day; a run's
    markings, lifecycle.halt_job's rule)."""
    marks: dict[int, list[str]] = defaultdict(list)
    for rows in (BatchConsumpQueue, ArchiveConsumpQueue):
        for batch_id, marking in rows.objects.filter(source_process=upstream).values_list(
            "source_batch_id", "batch_marking"
        ):
            marks[batch_id].append(marking)
    own: dict[int, str] = {}
    scans = list(
        Property.objects.filter(
            process__parent=upstream,
            process__deleted=False,
            process__process_type__job_kind="ingest.scan",
            config_group="scan",
            key="location",
        ).values_list("value", flat=True)
    )
    if scans:
        under = Q()
        for location in scans:
            under |= Q(path__startswith=location.rstrip("/") + "/")
        for batch_id, made in File.objects.filter(
            under,
            team_id=upstream.bus_domain.team_id,
            batch__bus_domain=upstream.bus_domain,
            batch__batch_type="file",
        ).values_list("batch_id", "creation_ts"):
            own[batch_id] = timezone.localtime(made).date().isoformat()
    else:
        runs = InstanceExec.objects.filter(
            process=upstream, parent__isnull=True, exec_state_id=ExecState.SUCCESS
        ).values_list("target_batch_id", "start_ts")
        for batch_id, started in runs:
            if batch_id is not None:
                claimed = ArchiveConsumpQueue.objects.filter(target_batch_id=batch_id)
                own[batch_id] = lifecycle.batch_marking(
                    upstream.pk, batch_id, started, claimed.values_list("batch_marking", flat=True)
                )
    ids = set(marks) | set(own)
    created = dict(Batch.objects.filter(pk__in=ids).values_list("pk", "created_ts"))
    return [
        (
            batch_id,
            markings.union(marks[batch_id]) if batch_id in marks else own[batch_id],
            timezone.localtime(created[batch_id]).date(),
        )
        for batch_id in sorted(ids)
    ]


@transaction.atomic
def queue_catch_up(
    job_id: int, since: date, *, name: str = "", by: Any = None
) -> tuple[Operation, list[CatchUp]]:
    """Queue the catch-up's batches (planned again, under the job's lock, so that a batch
    queued meanwhile is not queued twice) and record the operation."""
    job = Process.objects.get_live_job(job_id, lock=True)
    planned = plan_catch_up(job_id, since)
    now = timezone.now()
    try:
        # The queue holds a batch once per step (its unique constraint): an upstream's run
        # delivering one of them again at this moment (a replay) queues it first, and this
        # is refused rather than queue it twice.
        with transaction.atomic():
            BatchConsumpQueue.objects.bulk_create(
                BatchConsumpQueue(
                    source_batch_id=c.batch_id,
                    source_process_id=c.upstream_id,
                    process_id=c.step_id,
                    insert_ts=now,
                    batch_state_id=BatchState.NEW,
                    batch_marking=c.marking,
                )
                for c in planned
            )
    except IntegrityError:
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            f"a batch of the plan was queued for {job.name} meanwhile: show the plan again",
        ) from None
    # An upstream that closes days closed each day before the first day of what it last
    # delivered, on its consumers' rows: these rows too, as if queued then.
    for upstream_id in sorted({c.upstream_id for c in planned}):
        upstream = Process.objects.get(pk=upstream_id)
        if upstream.property_value(days.GROUP, days.ON_LATER_DAY) == markings.CLOSE_ON_LATER_DAY:
            last = max((c for c in planned if c.upstream_id == upstream_id), key=_batch)
            batch_queue.close_days(upstream, before=min(markings.days(last.marking), default=None))
    operation = record(
        kind=Kind.CATCH_UP,
        job=job,
        plan=[c.as_entry(job) for c in planned],
        asked={"job": job.pk, "since": since.isoformat()},
        name=name,
        by=by,
        rows=len(planned),
    )
    return operation, planned
