"""A file is a batch: register one (or a scan's many) into new batches queued for every step
downstream of the job that found them, and BDRE's GetFiles, the files of a range of a step's
batches. Each public function is one transaction, or runs in its caller's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet, Subquery
from django.utils import timezone

from batches.locations import LocationRefused, TeamStorage
from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState, File
from batches.queue import downstream_steps, enqueue_for_downstream, job_of
from bdre.errors import BdreError, Code
from processes.models import Process

Queue = BatchConsumpQueue


def register_file(
    *,
    source_process_id: int,
    path: str,
    file_size: int,
    file_hash: str,
    creation_ts: datetime,
    server_id: int | None = None,
    batch_marking: str | None = None,
) -> Batch:
    """A new batch holding one file, queued for every step downstream of the source job.

    A file already registered (same server, path and hash) is not registered again: its
    existing batch is returned and nothing is queued twice.
    """
    batch, _created = register_file_once(
        source_process_id=source_process_id,
        path=path,
        file_size=file_size,
        file_hash=file_hash,
        creation_ts=creation_ts,
        server_id=server_id,
        batch_marking=batch_marking,
    )
    return batch


@transaction.atomic
def register_file_once(
    *,
    source_process_id: int,
    path: str,
    file_size: int,
    file_hash: str,
    creation_ts: datetime,
    server_id: int | None = None,
    batch_marking: str | None = None,
) -> tuple[Batch, bool]:
    """:func:`register_file`, also telling whether this call registered the file.

    The path must lie inside the job's team's storage roots (inside the server's root when
    a server is named): :class:`~batches.locations.LocationRefused` otherwise, before any
    look-up, so no answer tells whether another team registered that path."""
    job = job_of(source_process_id)
    if file_size < 0:
        raise ValueError("file_size must not be negative")
    team_id = job.bus_domain.team_id
    storage = TeamStorage(team_id)
    server = storage.servers.get(server_id) if server_id is not None else None
    if server_id is not None and server is None:
        raise LocationRefused(f"server {server_id} is not a server of the team")
    storage.check(path, server=server)
    # Registered once per team: another team's registration of the same file (a root granted
    # to both) is neither returned nor a reason to refuse.
    same = {"team_id": team_id, "server_id": server_id, "path": path, "file_hash": file_hash}
    existing = File.objects.filter(**same).first()
    if existing is not None:
        return existing.batch, False
    now = timezone.now()
    batch = Batch.objects.create(bus_domain_id=job.bus_domain_id, batch_type="file")
    try:
        # A concurrent registration of the same file may win the unique index.
        with transaction.atomic():
            File.objects.create(batch=batch, file_size=file_size, creation_ts=creation_ts, **same)
    except IntegrityError:
        batch.delete()
        found = File.objects.get(**same)
        return found.batch, False
    if batch_marking is None:
        batch_marking = timezone.localtime(creation_ts).date().isoformat()
    enqueue_for_downstream(job=job, batch_id=batch.pk, batch_marking=batch_marking, now=now)
    return batch, True


def files_between(*, sub_process_id: int, min_batch_id: int, max_batch_id: int) -> list[File]:
    """BDRE's GetFiles: the files of the batches from ``min_batch_id`` to ``max_batch_id``
    queued for the step (live queue or archive). 114 if either batch is not in any queue, or
    not in this step's; 113 if the two batches belong to different steps."""
    steps_of: dict[int, set[int]] = {min_batch_id: set(), max_batch_id: set()}
    for model in (Queue, ArchiveConsumpQueue):
        for batch_id, step_id in model.objects.filter(
            source_batch_id__in=[min_batch_id, max_batch_id]
        ).values_list("source_batch_id", "process_id"):
            steps_of[batch_id].add(step_id)
    for batch_id, steps in steps_of.items():
        if not steps:
            raise BdreError(Code.BATCH_NOT_QUEUED, f"batch {batch_id}")
    if not steps_of[min_batch_id] & steps_of[max_batch_id]:
        raise BdreError(
            Code.BATCHES_OF_DIFFERENT_STEPS, f"batches {min_batch_id} and {max_batch_id}"
        )
    if sub_process_id not in steps_of[min_batch_id] & steps_of[max_batch_id]:
        raise BdreError(
            Code.BATCH_NOT_QUEUED,
            f"batches {min_batch_id}..{max_batch_id} are not queued for step {sub_process_id}",
        )
    in_range = Q(source_batch_id__gte=min_batch_id, source_batch_id__lte=max_batch_id)
    batch_ids = Queue.objects.filter(in_range, process_id=sub_process_id).values("source_batch_id")
    archived = ArchiveConsumpQueue.objects.filter(in_range, process_id=sub_process_id).values(
        "source_batch_id"
    )
    files: QuerySet[File] = File.objects.filter(
        Q(batch_id__in=Subquery(batch_ids)) | Q(batch_id__in=Subquery(archived))
    )
    return list(files.order_by("batch_id", "id"))


@dataclass(frozen=True)
class NewFile:
    path: str
    file_size: int
    file_hash: str
    creation_ts: datetime


def register_files(
    *, job: Process, files: Sequence[NewFile], server_id: int | None, now: datetime
) -> list[int]:
    """Register many new files at once, inside the caller's transaction: a batch, a ``File``
    row and a NEW row per downstream step for each, in three bulk statements. The caller has
    checked they are new; a concurrent registration of one of them raises IntegrityError for
    the caller to settle (``register_file`` settles it file by file)."""
    if not files:
        return []
    batches = Batch.objects.bulk_create(
        [Batch(bus_domain_id=job.bus_domain_id, batch_type="file") for _ in files]
    )
    File.objects.bulk_create(
        File(
            batch=batch,
            team_id=job.bus_domain.team_id,
            server_id=server_id,
            path=f.path,
            file_size=f.file_size,
            file_hash=f.file_hash,
            creation_ts=f.creation_ts,
        )
        for batch, f in zip(batches, files, strict=True)
    )
    steps = downstream_steps(job)
    Queue.objects.bulk_create(
        Queue(
            source_batch=batch,
            source_process=job,
            process_id=step_id,
            insert_ts=now,
            batch_state_id=BatchState.NEW,
            batch_marking=timezone.localtime(f.creation_ts).date().isoformat(),
        )
        for batch, f in zip(batches, files, strict=True)
        for step_id in steps
    )
    return [b.pk for b in batches]
