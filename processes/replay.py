"""Backfill, rewind and reprocess: batches a job already delivered, built again from the
input they were built from, and every batch downstream that provenance (the archived queue
rows: which run consumed which batch into which batch) says they fed.

One mechanism under the three: the archived claim of a delivered target batch goes back to
the live queue as FAILED rows of that same batch (``batches.queue.restore_claims``), so the
job's next run rebuilds it exactly as it rebuilds a failed run's batch: the same input, the
same output partitions replaced (``batch_id=<target>``), the same key in the deduplication
manifest. When the rebuilt batch is delivered again, its consumers' batches are rebuilt the
same way (``batches.queue.enqueue_for_downstream``), and so on down the graph: a downstream
job never gets a rebuilt batch as new input beside its first delivery (nothing twice), and
no partition outside the plan is touched (nothing else). A run rebuilds one batch; a job
with more waiting runs again after each success (``orchestrator.advance``).

What is asked for differs only in which batches are rebuilt first:

- backfill: the batches a job made on the days from ``since`` to ``until`` (the day each
  was first built, its ``created_ts``, in the installation's time zone);
- rewind: the batches a job made from a step's input from a given batch on;
- reprocess: one batch (a job's output: it is rebuilt; a registered file's batch: the
  batches made of it are), or one file (its batch).

``plan_*`` only reads: the pages and the API show the plan before it runs. ``put_back``
puts the first batches back; ``processes.tasks.start_replay`` does that and starts their
jobs' runs, recorded with the trigger.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.db import transaction
from django.utils import timezone

from batches import markings
from batches import queue as batch_queue
from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState, File
from bdre.errors import BdreError, Code
from processes import operations, schedules, step_kinds
from processes.models import (
    ExecState,
    InstanceExec,
    Operation,
    Process,
    Trigger,
    grouped_properties,
)

Archive = ArchiveConsumpQueue


@dataclass(frozen=True)
class Rebuild:
    """One batch to build again: the job that made it, its partitions that are replaced."""

    job_id: int
    job: str
    target_batch_id: int
    marking: str
    level: int  # 0: asked for; n: n hops downstream of one that was
    inputs: list[int]  # the batches it is rebuilt from
    partitions: list[str]  # db.table/batch_id=<target>, as its last delivery wrote them


@dataclass(frozen=True)
class ReplayPlan:
    trigger: str
    rebuilds: list[Rebuild] = field(default_factory=list)
    paused: list[int] = field(default_factory=list)  # jobs whose rebuilds wait for a resume

    @property
    def first(self) -> list[int]:
        return [r.target_batch_id for r in self.rebuilds if r.level == 0]

    @property
    def jobs_to_start(self) -> list[int]:
        return sorted({r.job_id for r in self.rebuilds if r.level == 0})

    def as_dict(self) -> dict[str, object]:
        return {
            "trigger": self.trigger,
            "batches": self.first,
            "rebuilds": [r.__dict__ for r in self.rebuilds],
            "partitions": [p for r in self.rebuilds for p in r.partitions],
            "paused": self.paused,
        }


# --- plans -----------------------------------------------------------------------------------


def plan_backfill(job_id: int, since: date, until: date, *, label: str = "") -> ReplayPlan:
    """The batches ``job_id`` made from ``since`` to ``until`` (inclusive), of input marked
    ``label`` when given (a marking's label, ``EOD`` of ``EOD@2026-11-20``), and
    downstream."""
    job = _job(job_id)
    if since > until:
        raise BdreError(Code.INVALID_RANGE, f"since {since} is after until {until}")
    made: set[int] = set()
    for target, created, marking in (
        Archive.objects.filter(process__parent=job)
        .values_list("target_batch_id", "target_batch__created_ts", "batch_marking")
        .distinct()
    ):
        if created is None or not since <= timezone.localtime(created).date() <= until:
            continue
        if label and not markings.has_label(marking, label):
            continue
        made.add(target)
    if not made:
        raise BdreError(
            Code.NO_BATCHES,
            f"{job.name} delivered no batch made from {since} to {until}"
            + (f" of input labelled {label}" if label else "")
            + ("" if _consumes(job) else " (it reads no queue: run it instead)"),
        )
    return _plan(Trigger.BACKFILL, made, team_id=_team(job))


def plan_rewind(step_id: int, batch_id: int | None = None, since: date | None = None) -> ReplayPlan:
    """The batches the step's job made of its input from ``batch_id`` on, or from the first
    input batch made on ``since`` or later, and downstream."""
    step = Process.objects.filter(pk=step_id, deleted=False, parent__isnull=False).first()
    if step is None:
        raise BdreError(Code.INVALID_SUB_PROCESS, f"{step_id} is not a live step")
    consumed = Archive.objects.filter(process=step)
    if since is not None:
        days = consumed.values_list("source_batch_id", "source_batch__created_ts")
        later = [b for b, made in days if timezone.localtime(made).date() >= since]
        batch_id = min(later, default=None)
        if batch_id is None:
            raise BdreError(
                Code.NO_BATCHES,
                f"{step.name} consumed no batch made on {since} or later"
                " (a job that never consumed them catches up instead)",
            )
    assert batch_id is not None, "a batch or a day"
    made = set(
        consumed.filter(source_batch_id__gte=batch_id).values_list("target_batch_id", flat=True)
    )
    if not made:
        raise BdreError(
            Code.NO_BATCHES,
            f"{step.name} consumed no batch from batch {batch_id} on"
            " (a job that never consumed them catches up instead)",
        )
    return _plan(Trigger.REWIND, made, team_id=_team(step))


def plan_reprocess_batch(batch_id: int) -> ReplayPlan:
    """A job's output batch, rebuilt; a registered file's batch: the batches made of it."""
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None:
        raise BdreError(Code.UNKNOWN_ROW, f"batch {batch_id} does not exist")
    live = BatchConsumpQueue.objects.exclude(batch_state_id=BatchState.DISCARDED)
    if (
        live.filter(target_batch_id=batch_id).exists()
        or live.filter(source_batch_id=batch_id, target_batch__isnull=False).exists()
    ):
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            f"batch {batch_id} (or what is made of it) is being built or waits to be rebuilt "
            "already",
        )
    if Archive.objects.filter(target_batch_id=batch_id).exists():
        made = {batch_id}
    else:
        made = set(
            Archive.objects.filter(source_batch_id=batch_id).values_list(
                "target_batch_id", flat=True
            )
        )
    if not made:
        raise BdreError(
            Code.NO_BATCHES,
            f"batch {batch_id} was not built from queued input, nor consumed yet: nothing to "
            "reprocess (a batch that waits in a queue is read as it is when it is claimed)",
        )
    team = batch.bus_domain.team_id if batch.bus_domain is not None else None
    return _plan(Trigger.REPROCESS, made, team_id=team)


def plan_reprocess_file(file_id: int) -> ReplayPlan:
    """The batches made of the file's batch, and downstream."""
    file = File.objects.filter(pk=file_id).first()
    if file is None:
        raise BdreError(Code.UNKNOWN_ROW, f"file {file_id} does not exist")
    return plan_reprocess_batch(file.batch_id)


def _plan(trigger: str, first: set[int], *, team_id: int | None) -> ReplayPlan:
    """``first`` and, hop by hop, every batch the archive says was made of them."""
    level_of: dict[int, int] = {}
    frontier, level = set(first), 0
    while frontier:
        for target in frontier:
            level_of.setdefault(target, level)
        frontier = {
            t
            for t in Archive.objects.filter(source_batch_id__in=frontier).values_list(
                "target_batch_id", flat=True
            )
            if t is not None and t not in level_of
        }
        level += 1
    rebuilds = _rebuilds(level_of, team_id)
    held = schedules.paused(sorted({r.job_id for r in rebuilds}))
    return ReplayPlan(trigger, rebuilds, sorted(held))


def _rebuilds(level_of: dict[int, int], team_id: int | None) -> list[Rebuild]:
    inputs: dict[int, set[int]] = defaultdict(set)
    marks: dict[int, list[str]] = defaultdict(list)
    step_of: dict[int, int] = {}
    for target, source, step, marking in Archive.objects.filter(
        target_batch_id__in=list(level_of)
    ).values_list("target_batch_id", "source_batch_id", "process_id", "batch_marking"):
        inputs[target].add(source)
        marks[target].append(marking)
        step_of.setdefault(target, step)
    steps = Process.objects.select_related("parent__bus_domain").in_bulk(list(step_of.values()))
    delivered = _last_deliveries(list(level_of))
    outside = _destinations({s.parent_id for s in steps.values() if s.parent_id is not None})
    rebuilds = []
    for target, level in sorted(level_of.items(), key=lambda item: (item[1], item[0])):
        job = steps[step_of[target]].parent
        assert job is not None  # a queue row's process is a step
        if job.bus_domain.team_id != team_id:
            # Provenance crosses into another team: rebuilding its batches is not this
            # team's to decide, and its names are not this team's to see.
            raise BdreError(
                Code.OTHER_TEAMS_BATCH,
                f"batch {target}: that team reprocesses its own batches",
            )
        run = delivered.get(target)
        rebuilds.append(
            Rebuild(
                job_id=job.pk,
                job=job.name,
                target_batch_id=target,
                marking=markings.union(marks[target]),
                level=level,
                inputs=sorted(inputs[target]),
                partitions=[f"{table}/batch_id={target}" for table in _written(run)]
                + [
                    f"{destination}/batch_id={batch}"
                    for destination in outside.get(job.pk, [])
                    for batch in sorted(inputs[target] | {target})
                ],
            )
        )
    return rebuilds


def _last_deliveries(targets: list[int]) -> dict[int, int]:
    runs: dict[int, int] = {}
    for run_id, target in (
        InstanceExec.objects.filter(
            parent__isnull=True, target_batch_id__in=targets, exec_state_id=ExecState.SUCCESS
        )
        .order_by("id")
        .values_list("id", "target_batch_id")
    ):
        runs[target] = run_id  # the last one wins
    return runs


def _written(run_id: int | None) -> list[str]:
    if run_id is None:
        return []
    tables: list[str] = []
    for outputs in InstanceExec.objects.filter(
        parent_id=run_id, exec_state_id=ExecState.SUCCESS
    ).values_list("outputs", flat=True):
        tables += [t for t in outputs or [] if t not in tables]
    return tables


def _destinations(job_ids: set[int]) -> dict[int, list[str]]:
    """Where each job's steps write outside its tables (their kind's ``destinations``: an
    export's folder, or its database table, ``lineage.steps.jdbc_name``, no credentials).
    Such a step writes the batches it read, its claimed ones and its run's own
    (``spark_io.input_batches``), each replaced when rebuilt: a folder's partition, a
    database table's rows of that batch."""
    found: dict[int, list[str]] = defaultdict(list)
    steps = Process.objects.filter(parent_id__in=job_ids, deleted=False)
    steps = steps.select_related("process_type").prefetch_related("properties").order_by("id")
    for step in steps:
        assert step.parent_id is not None
        kind = step_kinds.find(step.process_type.job_kind)
        if kind is not None:
            properties = grouped_properties(step.properties.all())
            written = kind.written_outside(properties, step.name)
            found[step.parent_id] += written
    return found


def _job(job_id: int) -> Process:
    return Process.objects.get_live_job(job_id)


def _consumes(job: Process) -> bool:
    return Process.objects.filter(
        parent=job, deleted=False, enqueuing_processes__isnull=False
    ).exists()


def _team(process: Process) -> int:
    return process.bus_domain.team_id


# --- execute ---------------------------------------------------------------------------------


@transaction.atomic
def put_back(
    plan: ReplayPlan, *, asked: dict[str, Any] | None = None, name: str = "", by: Any = None
) -> Operation:
    """Put the plan's first batches back in the queue, to be rebuilt (``processes.tasks.
    start_replay`` then starts their jobs), and record it as an operation (``asked``: what
    the user asked for; ``name``: its name, else one from what was asked). 118 when they
    are being rebuilt already."""
    # The jobs' rows first, as init_job locks them, then the queue rows.
    jobs = list(
        Process.objects.select_for_update(no_key=True)
        .filter(pk__in=plan.jobs_to_start)
        .order_by("pk")
    )
    rows = batch_queue.restore_claims(plan.first, now=timezone.now())
    if rows == 0:
        raise BdreError(
            Code.QUEUE_STATE_CONFLICT,
            "these batches are being rebuilt already (their input is back in the queue)",
        )
    first = next(r.job_id for r in plan.rebuilds if r.level == 0)
    return operations.record(
        kind=plan.trigger,
        job=next(j for j in jobs if j.pk == first),
        plan=[r.__dict__ for r in plan.rebuilds],
        asked=asked or {"batches": plan.first},
        name=name,
        by=by,
        rows=rows,
    )
