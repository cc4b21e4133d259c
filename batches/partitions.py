"""Write, audit, publish: the partitions of BDRE's tables, one record per attempt
(``batches.models.Partition``; docs/quality.md, "Write, audit, publish").

A step writes a table's partition for its job's target batch into a folder of its own,
``<table>/batch_id=<batch>/run-<step run>``: a retry, a rewind or a reprocess never writes
over what a reader may be reading, and no rename is needed (an object store has none). The
job's successful end publishes, in its own transaction, every partition its successful
steps wrote for the batch; a reader sees a batch's published partition, whole, or the one
before it. Which partition a reader sees is decided here and only here (:func:`visible`);
the files of failed attempts and of replaced partitions are removed by the reaper
(:func:`remove_unused`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from batches import stores
from batches.models import BatchConsumpQueue, BatchState, HiveTable, Partition, PartitionPreview
from processes.models import ExecState, InstanceExec, Process

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
State = Partition.State
# The folder of an attempt inside its batch's: no "=" in its name, so that Spark's
# partition discovery, given the table's folder as basePath, finds batch_id alone.
ATTEMPT_PREFIX = "run-"


def attempt_location(table: HiveTable, batch_id: int, step_run_id: int) -> str:
    """Where the step run ``step_run_id`` writes ``table``'s partition of ``batch_id``."""
    column = table.batch_id_partition_col or "batch_id"
    return f"{table.location.rstrip('/')}/{column}={batch_id}/{ATTEMPT_PREFIX}{step_run_id}"


def record_written(
    table: HiveTable,
    *,
    batch_id: int,
    step_run_id: int,
    location: str,
    rows: int | None,
    size: int | None,
    checks: list[dict[str, Any]] | None = None,
    now: datetime | None = None,
    spark: SparkSession | None = None,
) -> Partition:
    """The attempt's partition, written and not yet published (again, when the same step
    run writes it twice: the files were replaced in its own folder). A table's first
    attempt adopts the partitions written in place before (:func:`adopt`, through
    ``spark``'s Hadoop FileSystem on a store only Hadoop reaches)."""
    if not tracked(table):
        adopt(table, first_write=True, now=now, spark=spark)
    partition, _ = Partition.objects.update_or_create(
        table=table,
        batch_id=batch_id,
        step_run_id=step_run_id,
        defaults={
            "location": location,
            "rows": rows,
            "bytes": size,
            "checks": checks or [],
            "state": State.WRITTEN,
            "written_at": now or timezone.now(),
            # A step reaped while it still wrote may write again after the reaper removed
            # its folder: the files are back, and so is the reaper's work.
            "removed_at": None,
        },
    )
    return partition


def _written_by_success(tables: Iterable[int] | None, batch_id: int) -> QuerySet[Partition]:
    written = Partition.objects.filter(
        batch_id=batch_id, state=State.WRITTEN, step_run__exec_state_id=ExecState.SUCCESS
    ).select_related("step_run")
    return written if tables is None else written.filter(table_id__in=tables)


def _counted(attempts: list[Partition], job_run_id: int | None) -> list[Partition]:
    """Of successful attempts for a job's batch, those the lifecycle counts for its run
    ``job_run_id``: what the run's own steps wrote, and, for a step the run did not run (a
    re-run skips the steps that succeeded for the batch before), what that step's latest
    successful run wrote. A step the run ran again counts for what it wrote now only: a
    table it wrote before and not this time is not its output any more."""
    if job_run_id is None:
        return attempts
    ran = set(
        InstanceExec.objects.filter(parent_id=job_run_id).values_list("process_id", flat=True)
    )
    # Attempts of successful step runs: each has its run (adopted ones are never WRITTEN).
    runs = [(a, a.step_run) for a in attempts if a.step_run is not None]
    latest: dict[int, int] = {}
    for attempt, run in runs:
        latest[run.process_id] = max(latest.get(run.process_id, 0), attempt.step_run_id or 0)
    return [
        attempt
        for attempt, run in runs
        if run.parent_id == job_run_id
        or (run.process_id not in ran and attempt.step_run_id == latest[run.process_id])
    ]


def visible(
    table: HiveTable,
    batch_ids: Iterable[int] | None = None,
    *,
    own_batch: int | None = None,
    own_run: int | None = None,
) -> list[Partition]:
    """The partitions of ``table`` a reader sees, by batch: the published ones (of
    ``batch_ids``, or all); for ``own_batch``, the target batch of the job run ``own_run``
    the reader is a step of, what an earlier successful step of that run wrote (or a step
    the run skipped, in its run that succeeded), before the job publishes it; else the
    published one."""
    published = Partition.objects.filter(table=table, state=State.PUBLISHED)
    wanted = None if batch_ids is None else set(batch_ids)
    if wanted is not None:
        published = published.filter(batch_id__in=wanted)
    chosen = {p.batch_id: p for p in published}
    if own_batch is not None and (wanted is None or own_batch in wanted):
        attempts = list(_written_by_success([table.pk], own_batch).order_by("-step_run_id"))
        counted = _counted(attempts, own_run)
        if counted:
            chosen[own_batch] = counted[0]
    return [chosen[batch] for batch in sorted(chosen)]


def written_by(table: HiveTable, batch_id: int, step_run_id: int) -> Partition | None:
    """What the step run ``step_run_id`` wrote of ``table`` for ``batch_id``, if anything."""
    return Partition.objects.filter(table=table, batch_id=batch_id, step_run_id=step_run_id).first()


def tracked(table: HiveTable) -> bool:
    """Whether BDRE wrote a partition of ``table`` as an attempt. A table it never did (one
    written outside BDRE and registered, or before attempts had folders of their own) is
    read as its folders are."""
    return Partition.objects.filter(table=table).exists()


def published(table: HiveTable) -> QuerySet[Partition]:
    """The table's published partitions: what the catalog, replays and other jobs read."""
    return Partition.objects.filter(table=table, state=State.PUBLISHED).order_by("batch_id")


def publish(
    batch_id: int, *, job_run_id: int | None = None, now: datetime | None = None
) -> list[Partition]:
    """Publish what the job run ``job_run_id`` wrote for its target batch ``batch_id``
    (with the steps it skipped: :func:`_counted`): per table its latest attempt replaces
    the published partition; every other successful attempt for the batch is discarded. In
    the caller's transaction (the job's halt): all of it, or nothing. A few statements
    whatever the number of partitions."""
    now = now or timezone.now()
    # The caller's transaction when there is one (no savepoint: two statements more).
    with transaction.atomic(savepoint=False):
        written = list(
            _written_by_success(None, batch_id)
            .select_for_update(of=("self",))
            .order_by("table_id", "-step_run_id")
        )
        counted = {p.pk for p in _counted(written, job_run_id)}
        latest: dict[int, Partition] = {}
        superseded: list[int] = []
        for partition in written:
            if partition.pk not in counted or partition.table_id in latest:
                superseded.append(partition.pk)
            else:
                latest[partition.table_id] = partition
        if not latest:
            return []
        Partition.objects.filter(
            batch_id=batch_id, table_id__in=latest, state=State.PUBLISHED
        ).update(state=State.REPLACED, replaced_at=now)
        Partition.objects.filter(pk__in=superseded).update(state=State.DISCARDED)
        Partition.objects.filter(pk__in=[p.pk for p in latest.values()]).update(
            state=State.PUBLISHED, published_at=now
        )
    return list(Partition.objects.filter(pk__in=[p.pk for p in latest.values()]))


def _given_up() -> Q:
    """A batch whose claim went to the dead letter whole: every live queue row of it is
    discarded, so no run is rebuilding it and none will until a requeue."""
    rows = BatchConsumpQueue.objects.filter(target_batch_id=OuterRef("batch_id"))
    return Q(
        Exists(rows.filter(batch_state_id=BatchState.DISCARDED)),
        ~Exists(rows.exclude(batch_state_id=BatchState.DISCARDED)),
    )


def unused(now: datetime | None = None) -> QuerySet[Partition]:
    """Partitions whose files no reader sees or will see, not removed yet: discarded ones,
    those a failed attempt wrote, those a successful step wrote for a batch given up (its
    input in the dead letter: a requeue rebuilds it whole, :func:`lost_steps`), and those
    replaced longer ago than the grace period."""
    now = now or timezone.now()
    grace = timedelta(seconds=settings.BDRE_PARTITION_GRACE_SECONDS)
    return Partition.objects.filter(removed_at__isnull=True).filter(
        Q(state=State.DISCARDED)
        | Q(state=State.WRITTEN, step_run__exec_state_id__in=ExecState.failed())
        | (Q(state=State.WRITTEN, step_run__exec_state_id=ExecState.SUCCESS) & _given_up())
        | Q(state=State.REPLACED, replaced_at__lte=now - grace)
    )


def _discard_written(partition: Partition) -> bool:
    """An attempt no run will publish, DISCARDED; False when a run may still publish it.
    A failed step run's attempt never is published (publish takes only the attempts of
    successful step runs). A successful one's batch may be requeued at any moment: its rows
    are locked (as a requeue locks the one it changes) and read again, so that either the
    requeue comes first and the attempt stays for the re-run to skip its step, or the
    attempt is discarded first and the re-run, seeing it discarded, runs the step again."""
    run = partition.step_run
    with transaction.atomic():
        if run is not None and run.exec_state_id == ExecState.SUCCESS:
            # In the order a requeue and init_job take them: the job's row, then the queue
            # rows by id (two orders could deadlock on PostgreSQL).
            job_id = Process.objects.filter(pk=run.process_id).values_list("parent_id", flat=True)
            list(Process.objects.select_for_update(no_key=True).filter(pk__in=job_id))
            states = set(
                BatchConsumpQueue.objects.select_for_update()
                .filter(target_batch_id=partition.batch_id)
                .order_by("pk")
                .values_list("batch_state_id", flat=True)
            )
            if states != {BatchState.DISCARDED}:
                return False
        return bool(
            Partition.objects.filter(pk=partition.pk, state=State.WRITTEN).update(
                state=State.DISCARDED
            )
        )


def lost_steps(step_run_ids: Iterable[int]) -> set[int]:
    """Of these successful step runs, those an attempt of which was discarded before its job
    published it (its batch was given up): a re-run cannot reuse what they wrote."""
    return set(
        Partition.objects.filter(
            step_run_id__in=list(step_run_ids), state=State.DISCARDED
        ).values_list("step_run_id", flat=True)
    )


def _reached_without_spark() -> Q:
    """The partitions whose folders this process reaches by itself (stores.OWN_PREFIXES)."""
    reached = Q()
    for prefix in stores.OWN_PREFIXES:
        reached |= Q(location__startswith=prefix)
    return reached


def left_for_spark(now: datetime | None = None) -> list[Partition]:
    """The unused partitions on a store only Hadoop reaches (at most as many as a pass
    removes), with the step run that wrote them: a Spark worker removes them with its
    session (``batches.tasks.remove_unused_partitions``)."""
    waiting = unused(now).exclude(_reached_without_spark()).select_related("step_run__process")
    return list(waiting.order_by("id")[:REMOVED_A_PASS])


# At most this many partitions' files a pass removes; the next pass goes on.
REMOVED_A_PASS = 500


def remove_unused(
    now: datetime | None = None,
    spark: SparkSession | None = None,
    ids: Iterable[int] | None = None,
) -> list[int]:
    """Remove the files of :func:`unused` partitions; returns the ids removed. Each
    partition's state is checked again as its files go (a conditional update), so that a
    partition published since the listing is never removed. Without ``spark``, those on a
    local folder or S3; with it, those of ``ids`` (:func:`left_for_spark`'s), through its
    Hadoop FileSystem (a Connect session cannot: :class:`stores.StoreUnreachable`, before
    anything is claimed)."""
    now = now or timezone.now()
    candidates = unused(now)
    if spark is None:
        candidates = candidates.filter(_reached_without_spark())
    else:
        candidates = candidates.filter(pk__in=list(ids or ()))
        if candidates.exclude(_reached_without_spark()).exists():
            stores.HadoopStore(spark)
    removed = []
    for partition in candidates.select_related("table", "step_run").order_by("id")[:REMOVED_A_PASS]:
        if partition.state == State.WRITTEN and not _discard_written(partition):
            continue
        claimed = Partition.objects.filter(
            pk=partition.pk, state__in=[State.DISCARDED, State.REPLACED], removed_at__isnull=True
        ).update(removed_at=now)
        if not claimed:
            continue
        try:
            stores.of(partition.location, spark).remove(partition.location)
        except Exception:
            # The store refused or was out of reach: tried again at the reaper's next pass.
            log.warning("could not remove %s", partition.location, exc_info=True)
            Partition.objects.filter(pk=partition.pk).update(removed_at=None)
            continue
        # Its sample rows, kept in the registry, go with its files.
        PartitionPreview.objects.filter(partition=partition).delete()
        removed.append(partition.pk)
    return removed


def read(spark: SparkSession, table_location: str, locations: list[str]) -> DataFrame:
    """The partitions at ``locations`` of the table at ``table_location``, with the batch
    column their folders name (the table's folder is the base of partition discovery; an
    attempt's folder has no ``=`` in its name)."""
    from batches.locations import spark_path

    return spark.read.option("basePath", spark_path(table_location)).parquet(
        *(spark_path(location) for location in locations)
    )


# --- partitions written before attempts had folders of their own ---------------------------

# The folder a partition written in place (``batch_id=<n>/part-*``) is moved into when it is
# adopted: an attempt's folder like the others, so that no reader's listing of a later
# attempt's folder, nor the reaper's removal of one, takes in the other's files.
LEGACY = "legacy"


@transaction.atomic
def adopt(
    table: HiveTable,
    *,
    first_write: bool = False,
    now: datetime | None = None,
    spark: SparkSession | None = None,
) -> list[Partition]:
    """Record the partitions of ``table`` that a step wrote in place, before attempts had
    folders of their own (``<table>/batch_id=<n>/part-*``): their files moved into the
    batch's ``legacy`` folder, published (or replaced, when the batch has a published
    attempt already, so that the reaper removes them after the grace). Run by ``manage.py
    adopt_partitions`` once after an upgrade, and on a table's first write by attempt, so
    that no batch of a table disappears from its readers' view (``first_write``: unless
    another first write adopted it meanwhile). On a store only Hadoop reaches, through
    ``spark``'s Hadoop FileSystem. Idempotent."""
    from batches.models import Batch

    if not table.batch_id_partition_col:
        return []
    store = stores.of(table.location, spark)
    now = now or timezone.now()
    column = table.batch_id_partition_col
    # The table's row lock: two first writes of the table (two jobs) adopt it once, and
    # its partitions are recorded together, on commit.
    HiveTable.objects.select_for_update().filter(pk=table.pk).first()
    if first_write and tracked(table):
        return []
    found = _files_in_place(store, table.location, column)
    known = set(Batch.objects.filter(pk__in=found).values_list("pk", flat=True))
    published_batches = set(
        Partition.objects.filter(table=table, state=State.PUBLISHED).values_list(
            "batch_id", flat=True
        )
    )
    adopted = []
    for batch_id in sorted(found):
        if batch_id not in known:
            continue  # not a batch of BDRE's: a folder someone else wrote there
        folder = f"{table.location.rstrip('/')}/{column}={batch_id}"
        target = f"{folder}/{LEGACY}"
        store.move(folder, found[batch_id], target)
        replaced = batch_id in published_batches
        partition, _ = Partition.objects.update_or_create(
            table=table,
            batch_id=batch_id,
            step_run=None,
            defaults={
                "location": target,
                "bytes": None,
                "state": State.REPLACED if replaced else State.PUBLISHED,
                "written_at": now,
                "published_at": now,
                "replaced_at": now if replaced else None,
            },
        )
        adopted.append(partition)
    return adopted


def _files_in_place(store: stores.Store, location: str, column: str) -> dict[int, list[str]]:
    """batch -> the names of the files directly in its ``<column>=<batch>`` folder."""
    found: dict[int, list[str]] = {}
    for key, _size in store.files(location):
        parts = key.split("/")
        value = parts[0].partition("=")[2]
        if len(parts) == 2 and parts[0].startswith(f"{column}=") and value.isdigit():
            found.setdefault(int(value), []).append(parts[1])
    return found


# --- the files ---------------------------------------------------------------------------


def size_of(location: str, spark: SparkSession | None = None) -> int | None:
    """The bytes of the data files in the attempt's folder; None when the store cannot be
    listed from here (the size is for people, the data is there all the same)."""
    try:
        return sum(size for _, size in data_files(location, spark))
    except Exception:
        log.warning("could not list %s for its size", location, exc_info=True)
        return None


def data_files(location: str, spark: SparkSession | None = None) -> list[tuple[str, int]]:
    """The data files in a partition's folder, each by its name inside the folder with its
    size, in name order; none for a folder that is not there."""
    listed = stores.of(location, spark).files(location)
    return [(name, size) for name, size in listed if _is_data(name)]


def _is_data(name: str) -> bool:
    # Spark's own files beside the data (_SUCCESS, .crc checksums) are not the partition's.
    leaf = name.rsplit("/", 1)[-1]
    return not leaf.startswith(("_", "."))
