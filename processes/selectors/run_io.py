"""What each step of a run read and wrote, for the run page: the batches it consumed (with
their files), the tables and folders it read, the partitions it wrote (table, rows, whether
they were published), the files it wrote outside the tables (an export's), and the
properties it ran with (its SQL among them). A table links its page when the user may see it
(``batches.selectors.tables``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Sum

from batches import selectors as batch_selectors
from batches.models import ArchiveConsumpQueue, BatchConsumpQueue, File, Partition
from bdre.access import AnyUser
from processes.models import SCHEDULE_GROUP, InstanceExec, Property


@dataclass
class Read:
    name: str  # db.table, or a folder's or database's URI
    table_id: int | None = None  # a registered table the user may see: its page


@dataclass
class Consumed:
    batch_id: int
    files: int
    size: int


@dataclass
class Written:
    table: str
    table_id: int | None
    rows: int | None
    state: str  # the partition's: written, published, replaced, discarded


@dataclass
class FileWritten:
    path: str
    bytes: int


@dataclass
class StepIO:
    consumed: list[Consumed] = field(default_factory=list)
    read: list[Read] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)
    files: list[FileWritten] = field(default_factory=list)  # outside the tables: an export's
    properties: dict[str, list[Property]] = field(default_factory=dict)


def step_io(user: AnyUser, run: InstanceExec, steps: list[InstanceExec]) -> dict[int, StepIO]:
    """Step run id -> what it read and wrote, for ``run``'s step runs ``steps``."""
    found: dict[int, StepIO] = {s.pk: StepIO() for s in steps}
    named = {
        f"{db}.{name}".lower(): pk
        for pk, db, name in batch_selectors.tables(user).values_list("pk", "dbname", "table_name")
    }
    visible = set(named.values())
    for step in steps:
        found[step.pk].read = [Read(n, named.get(str(n).lower())) for n in step.inputs or []]
        found[step.pk].files = [
            FileWritten(f["path"], f["bytes"]) for f in step.files_written or []
        ]
    # The batches each step consumed for the run's batch: queue rows, live and archived (a
    # batch claimed twice, by a retry, is one batch); their files counted per batch.
    step_of = {s.process_id: s.pk for s in steps}
    pairs: dict[int, set[int]] = defaultdict(set)
    if run.target_batch_id is not None:
        for rows in (BatchConsumpQueue, ArchiveConsumpQueue):
            for process_id, batch_id in rows.objects.filter(
                target_batch_id=run.target_batch_id, process_id__in=step_of
            ).values_list("process_id", "source_batch_id"):
                pairs[process_id].add(batch_id)
    counted = (
        File.objects.filter(batch_id__in={b for bs in pairs.values() for b in bs})
        .values("batch_id")
        .annotate(n=Count("id"), size=Sum("file_size"))
        .values_list("batch_id", "n", "size")
    )
    files = {batch_id: (n, size or 0) for batch_id, n, size in counted}
    for process_id, batch_ids in pairs.items():
        found[step_of[process_id]].consumed = [
            Consumed(b, *files.get(b, (0, 0))) for b in sorted(batch_ids)
        ]
    for partition in (
        Partition.objects.filter(step_run_id__in=found)
        .select_related("table")
        .order_by("table__dbname", "table__table_name", "id")
    ):
        table = partition.table
        found[partition.step_run_id or 0].written.append(
            Written(
                f"{table.dbname}.{table.table_name}",
                table.pk if table.pk in visible else None,
                partition.rows,
                partition.get_state_display().lower(),
            )
        )
    groups: dict[int, dict[str, list[Property]]] = defaultdict(lambda: defaultdict(list))
    for prop in (
        Property.objects.filter(process_id__in=step_of)
        .exclude(config_group=SCHEDULE_GROUP)
        .order_by("config_group", "key")
    ):
        groups[step_of[prop.process_id]][prop.config_group].append(prop)
    for step_run_id, by_group in groups.items():
        found[step_run_id].properties = dict(by_group)
    return found
