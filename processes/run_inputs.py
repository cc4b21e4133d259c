"""What a job run works on, read inside ``init_job``'s transaction (processes.lifecycle) and
by a step when it runs: the batches and files its job run claimed for each step, the batch a
re-run rebuilds and the steps it skips. Reads only: every write is the lifecycle's."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone

from batches import markings, partitions
from batches import queue as batch_queue
from batches.models import SEED_BATCH_ID, BatchConsumpQueue, BatchState, File
from processes.models import ExecState, InstanceExec, Process, Trigger
from processes.workflow import predecessors

Queue = BatchConsumpQueue


@dataclass(frozen=True)
class FileInfo:
    batch_id: int
    path: str
    file_size: int
    file_hash: str
    server_id: int | None


@dataclass
class StepBatches:
    sub_process_id: int
    min_batch_id: int
    max_batch_id: int
    min_batch_marking: str | None
    max_batch_marking: str | None
    batch_ids: list[int]
    files: list[FileInfo] = field(default_factory=list)


def rerun_trigger(target_batch_id: int, asked: str) -> str:
    """A re-run of a batch is a retry if no run of it ever succeeded, otherwise a replay
    (unless it is the one a backfill, rewind or reprocess asked for)."""
    if asked in (Trigger.BACKFILL, Trigger.REWIND, Trigger.REPROCESS):
        return asked
    return Trigger.REPLAY if last_success(target_batch_id) else Trigger.RETRY


def last_success(target_batch_id: int) -> int:
    """The id of the last job run that delivered ``target_batch_id``, or 0."""
    return (
        InstanceExec.objects.filter(
            parent__isnull=True, target_batch_id=target_batch_id, exec_state_id=ExecState.SUCCESS
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
        or 0
    )


def _waiting(job_id: int) -> QuerySet[BatchConsumpQueue]:
    """The job's queue rows not discarded: claimable, to retry, or held by a run."""
    return Queue.objects.filter(process__parent_id=job_id).exclude(
        batch_state_id=BatchState.DISCARDED
    )


def has_queued_input(job_id: int) -> bool:
    """Whether batches wait in the queue for one of the job's steps (claimable or to retry)."""
    return _waiting(job_id).filter(process__deleted=False).exists()


def has_rebuilds(job_id: int) -> bool:
    """Whether batches of the job wait to be rebuilt (a failed run's, or ones a backfill,
    rewind or reprocess put back): live rows with a target batch once no run holds them.
    Its next run takes the oldest."""
    return _waiting(job_id).filter(target_batch__isnull=False).exists()


def step_batches(target_batch_id: int, step: Process) -> StepBatches:
    """What a step of a running job works on: the batches (and their files) its job run
    claimed for it, as ``init_job`` returned them."""
    per_step, _marking, _sources = claimed(target_batch_id, [step], timezone.now())
    return per_step[step.pk]


def rerun_target(job: Process, consuming: list[Process]) -> int | None:
    """The target batch to rebuild, if any: the oldest one of the job that still holds live
    rows in the queue (a run of it failed, or its dead letters were requeued), or, for a job
    that reads no queue, its last run's batch if that run failed.

    Live rows with a target batch belong to a run that did not succeed (a successful run
    archives its rows; a running one stops init_job before this). Rebuilding that batch
    rather than claiming its rows into a new one keeps every attempt of the same input on
    the same batch: the same output partitions are replaced, and the deduplication
    manifest, keyed on it, never takes the input's own events for duplicates. Rows a step
    finished (PROCESSED) count as much as FAILED ones: they belong to the batch being
    rebuilt. Only when all went to the dead letter is the batch given up."""
    if consuming:
        return (
            Queue.objects.filter(
                process_id__in=[s.pk for s in consuming], target_batch__isnull=False
            )
            .exclude(batch_state_id=BatchState.DISCARDED)
            .order_by("target_batch_id")
            .values_list("target_batch_id", flat=True)
            .first()
        )
    last = (
        InstanceExec.objects.filter(process=job)
        .order_by("-id")
        .values("exec_state_id", "target_batch_id")
        .first()
    )
    if not last or last["exec_state_id"] not in ExecState.failed():
        return None
    return last["target_batch_id"]


def recovered_steps(steps: list[Process], target_batch_id: int) -> set[int]:
    """Steps a re-run skips: a recovery point is a step that succeeded for this target batch
    in an earlier run, has ``can_recover``, and whose ancestors all succeeded too; the re-run
    resumes after the last of them, skipping it and everything before it."""
    # Only since the batch was last delivered: a batch rebuilt after it succeeded (a
    # backfill, rewind or reprocess) is rebuilt whole.
    latest: dict[int, int] = {}  # step -> its latest successful run for the batch
    for run_id, step_id in (
        InstanceExec.objects.filter(
            parent__target_batch_id=target_batch_id,
            parent_id__gt=last_success(target_batch_id),
            process_id__in=[s.pk for s in steps],
            exec_state_id=ExecState.SUCCESS,
        )
        .order_by("pk")
        .values_list("pk", "process_id")
    ):
        latest[step_id] = run_id
    # A step whose output the reaper removed while the batch was given up (in the dead
    # letter) is run again: what it wrote is gone. Its later success (a re-run after the
    # requeue) is what counts, not the attempt removed before it.
    lost = partitions.lost_steps(latest.values())
    succeeded = {step for step, run in latest.items() if run not in lost}
    before = predecessors(steps)
    ancestors: dict[int, set[int]] = {}
    for step in steps:  # topological order: a step's predecessors come first
        ancestors[step.pk] = set().union(*({p} | ancestors.get(p, set()) for p in before[step.pk]))
    skipped: set[int] = set()
    for step in steps:
        if step.pk in succeeded and step.can_recover and ancestors[step.pk] <= succeeded:
            skipped |= {step.pk} | ancestors[step.pk]
    return skipped


def claimed(
    target_id: int, steps: list[Process], now: datetime
) -> tuple[dict[int, StepBatches], str, dict[int, set[int]]]:
    """What each step has to work on (and which upstream jobs it came from), in two queries
    whatever the number of rows."""
    # A target batch belongs to one job run: filtering on it alone keeps both queries on
    # its index (an extra "process_id IN" can lead the planner to the far larger per-step
    # index at depth).
    claimed = batch_queue.claimed_rows(target_id)
    batches_of: dict[int, list[int]] = defaultdict(list)
    marks_of: dict[int, list[str]] = defaultdict(list)
    sources: dict[int, set[int]] = defaultdict(set)
    for step_id, batch_id, marking, source in claimed.values_list(
        "process_id", "source_batch_id", "batch_marking", "source_process_id"
    ):
        batches_of[step_id].append(batch_id)
        marks_of[step_id].append(marking)
        if source is not None:
            sources[step_id].add(source)
    files_of: dict[int, list[FileInfo]] = defaultdict(list)
    if batches_of:
        for f in File.objects.filter(batch_id__in=claimed.values("source_batch_id")).order_by(
            "batch_id", "id"
        ):
            files_of[f.batch_id].append(
                FileInfo(f.batch_id, f.path, f.file_size, f.file_hash, f.server_id)
            )
    result: dict[int, StepBatches] = {}
    for step in steps:
        ids = sorted(batches_of.get(step.pk, [])) or [SEED_BATCH_ID]
        result[step.pk] = StepBatches(
            sub_process_id=step.pk,
            min_batch_id=ids[0],
            max_batch_id=ids[-1],
            min_batch_marking=markings.min_date(marks_of.get(step.pk, [])),
            max_batch_marking=markings.max_date(marks_of.get(step.pk, [])),
            batch_ids=ids,
            files=[f for b in ids for f in files_of.get(b, [])],
        )
    all_marks = [m for marks in marks_of.values() for m in marks]
    target_marking = markings.union(all_marks) or timezone.localtime(now).date().isoformat()
    return result, target_marking, sources
