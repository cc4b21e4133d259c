"""A look at a table's rows: the first rows of one of its partitions (the table page's
preview, the API's ``tables/{id}/preview/``), read by Spark on a worker.

A user asks (:func:`request`); a worker of the Spark queue reads (:func:`read`) through the
steps' own session, with its sandbox's settings, and their partition reader
(``batches.partitions.read``), then records the rows in the preview for the page and the API
to show. Which partitions a user may ask for is the selectors' decision
(``selectors.table_partitions`` of a table ``selectors.tables`` lets him see); this module
takes no SQL and no location from anyone: it reads the recorded partition's folder. What it
reads is bounded: at most :data:`MAX_ROWS` rows, each value cut to :data:`MAX_TEXT`
characters, and Spark's jobs stopped after ``BDRE_PREVIEW_SECONDS``.

A partition's files never change (each attempt writes a folder of its own), so a preview
read once is shown again, to everyone who may see the partition, until the reaper removes
the files and the preview with them."""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from batches.models import Partition, PartitionPreview
from bdre.errors import BdreError, Code
from bdre.sql_parse import struct_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

DEFAULT_ROWS = 20
MAX_ROWS = 200
MAX_TEXT = 300  # characters of a value shown; a nested value is shown as JSON

State = PartitionPreview.State
WAITING = (State.QUEUED, State.RUNNING)
INTERRUPT_ON_CANCEL = "spark.job.interruptOnCancel"  # SparkContext's local property


def refusal(partition: Partition) -> BdreError | None:
    """Why ``partition``'s rows cannot be read at all (its files were removed), or None."""
    if partition.removed_at is None:
        return None
    return BdreError(
        Code.PARTITION_UNREADABLE,
        f"the files of batch {partition.batch_id}'s partition were removed "
        f"{partition.removed_at:%Y-%m-%d %H:%M} UTC ({partition.get_state_display().lower()})",
    )


def latest(partition: Partition, rows: int = DEFAULT_ROWS) -> PartitionPreview | None:
    """The newest preview of ``rows`` rows of ``partition`` anyone asked for."""
    return PartitionPreview.objects.filter(partition=partition, rows=rows).first()


# How long a preview being read may go past its time before it counts as lost: the worker
# starts its Spark session first when it has none (a JVM), which the time bound does not cover.
RUNNING_MARGIN_SECONDS = 120


def given_up(preview: PartitionPreview, now: datetime | None = None) -> bool:
    """Whether ``preview`` will not be read: no worker took it from the Spark queue within
    ``BDRE_PREVIEW_WAIT_SECONDS`` (none consumes it, or each is busy with a long step), or
    the worker reading it stopped long past its time (it died)."""
    now = now or timezone.now()
    if preview.state == State.QUEUED:
        return now - preview.asked_at > timedelta(seconds=settings.BDRE_PREVIEW_WAIT_SECONDS)
    if preview.state == State.RUNNING:
        started = preview.started_at or preview.asked_at
        limit = settings.BDRE_PREVIEW_SECONDS + RUNNING_MARGIN_SECONDS
        return now - started > timedelta(seconds=limit)
    return False


def given_up_message(preview: PartitionPreview) -> str:
    if preview.state == State.RUNNING:
        return "the Spark worker reading it stopped answering (it may have died): ask again"
    minutes = round(settings.BDRE_PREVIEW_WAIT_SECONDS / 60)
    return (
        f"no Spark worker took it within {minutes} minute{'s' if minutes != 1 else ''}: "
        f"is a worker consuming the queue {settings.BDRE_SPARK_QUEUE!r}, or are they all busy "
        "with long steps? Ask again"
    )


@transaction.atomic
def request(
    partition: Partition,
    rows: int = DEFAULT_ROWS,
    by: Any = None,
    now: datetime | None = None,
) -> tuple[PartitionPreview, bool]:
    """The preview of ``rows`` rows (1 to :data:`MAX_ROWS`) of ``partition``: one read
    already or being read, else a new one waiting for a worker; and whether it is new (the
    caller queues its read). One that failed or was given up is asked again."""
    if not 1 <= rows <= MAX_ROWS:
        raise ValueError(f"rows: from 1 to {MAX_ROWS}, not {rows}")
    now = now or timezone.now()
    # Two users asking at once queue one read: the second waits here for the first's row.
    locked = Partition.objects.select_for_update().get(pk=partition.pk)
    refused = refusal(locked)
    if refused is not None:
        raise refused
    newest = latest(locked, rows)
    if newest is not None and given_up(newest, now):
        # Conditional: a worker that starts it after all finds it given up and leaves it.
        PartitionPreview.objects.filter(pk=newest.pk, state=newest.state).update(
            state=State.FAILED, message=given_up_message(newest), finished_at=now
        )
        newest.refresh_from_db()
    if newest is not None and newest.state != State.FAILED:
        return newest, False
    PartitionPreview.objects.filter(partition=locked, rows=rows, state=State.FAILED).delete()
    user = by if getattr(by, "is_authenticated", False) else None
    try:
        with transaction.atomic():
            created = PartitionPreview.objects.create(
                partition=locked, rows=rows, asked_by=user, asked_at=now
            )
    except IntegrityError:
        # Another request made it meanwhile (SQLite has no row lock to wait on): that one.
        other = latest(locked, rows)
        assert other is not None  # the constraint that refused this one is its
        return other, False
    return created, True


class _TimedOut(Exception):
    pass


def read(preview_id: int, spark: Callable[[], SparkSession]) -> PartitionPreview | None:
    """Read the rows of the preview ``preview_id`` with the session ``spark()`` gives and
    record them, or why they could not be read; None when it was read already or given up
    (a task delivered twice, a worker that took it too late)."""
    started = PartitionPreview.objects.filter(pk=preview_id, state=State.QUEUED).update(
        state=State.RUNNING, started_at=timezone.now()
    )
    if not started:
        return None
    preview = (
        PartitionPreview.objects.select_related("partition__table").filter(pk=preview_id).first()
    )
    if preview is None:
        return None  # its partition's files were removed, and it with them
    partition = preview.partition
    seconds = settings.BDRE_PREVIEW_SECONDS
    done: dict[str, Any] = {"state": State.FAILED}
    try:
        refused = refusal(partition)
        if refused is not None:
            done["message"] = refused.message
        elif partition.rows == 0:
            # An empty batch writes no data file, only Spark's _SUCCESS: nothing to read.
            done |= {"state": State.DONE, "columns": [list(c) for c in _columns_of(partition)]}
        else:
            columns, values, more = _bounded(
                spark(), lambda session: _first_rows(session, partition, preview.rows), seconds
            )
            done |= {"state": State.DONE, "columns": columns, "values": values, "more": more}
    except (_TimedOut, SoftTimeLimitExceeded):
        done["message"] = (
            f"Spark took longer than {seconds} s to read it and was stopped: ask again "
            "when the Spark workers are less busy"
        )
    except Exception as exc:
        # Whatever Spark or the store raised, the preview must not stay "being read"; the
        # worker's log keeps the whole error, the user gets its reason without the paths.
        log.warning("preview %s of %s could not be read", preview_id, partition, exc_info=True)
        done["message"] = _reason(exc)
    # Conditional on the state: a preview given up meanwhile stays given up.
    PartitionPreview.objects.filter(pk=preview_id, state=State.RUNNING).update(
        finished_at=timezone.now(), **done
    )
    return PartitionPreview.objects.filter(pk=preview_id).first()


def _bounded(
    session: SparkSession,
    work: Callable[[SparkSession], tuple[list[list[str]], list[list[str]], bool]],
    seconds: float,
) -> tuple[list[list[str]], list[list[str]], bool]:
    """``work(session)``, its Spark jobs interrupted after ``seconds``: tagged, so that
    only they are stopped, never a step's jobs in the same session."""
    tag = f"bdre-preview-{uuid.uuid4().hex}"
    # A Connect session tags its operations on the server. A classic one's interruptTag
    # cancelled nothing of a running collect (PySpark 4.3): there the SparkContext's job
    # tags do it, with the tasks' threads interrupted too, so that one blocked reading a
    # store stops at once; the thread's earlier setting is put back after.
    tagged: Callable[[str], object]
    interrupt: Callable[[str], object]
    untag: Callable[[str], object]
    if type(session).__module__.startswith("pyspark.sql.connect"):
        tagged, interrupt, untag = session.addTag, session.interruptTag, session.removeTag
    else:
        context = session.sparkContext
        previous = context.getLocalProperty(INTERRUPT_ON_CANCEL)
        context.setLocalProperty(INTERRUPT_ON_CANCEL, "true")

        def untag(tag: str) -> None:
            context.removeJobTag(tag)
            context.setLocalProperty(INTERRUPT_ON_CANCEL, previous)  # type: ignore[arg-type]

        tagged, interrupt = context.addJobTag, context.cancelJobsWithTag

    finished, stopped = threading.Event(), threading.Event()

    def watch() -> None:
        if finished.wait(seconds):
            return
        stopped.set()
        # Again each second until the work returns: a deadline that falls between two of
        # its jobs (listing the folder, reading the footers) would let the next one run on.
        while True:
            interrupt(tag)
            if finished.wait(1.0):
                return

    tagged(tag)
    watcher = threading.Thread(target=watch, name=tag, daemon=True)
    watcher.start()
    try:
        return work(session)
    except Exception as exc:
        if stopped.is_set():
            raise _TimedOut from exc
        raise
    finally:
        finished.set()
        watcher.join()
        untag(tag)


def _first_rows(
    session: SparkSession, partition: Partition, limit: int
) -> tuple[list[list[str]], list[list[str]], bool]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    from batches import partitions

    table = partition.table
    frame: DataFrame = partitions.read(session, table.location, [partition.location])
    fields = frame.schema.fields
    # Long texts and bytes cut by Spark, one past what is shown (so that _text marks the
    # cut): a row of megabyte values never travels to the worker whole.
    cut = [
        F.substring(frame[f.name], 1, MAX_TEXT + 1).alias(f.name)
        if isinstance(f.dataType, StringType)
        else F.substring(frame[f.name], 1, MAX_TEXT // 2 + 1).alias(f.name)
        if isinstance(f.dataType, BinaryType)
        else frame[f.name]
        for f in fields
    ]
    # One more than asked: whether the partition holds more rows than shown.
    rows = frame.select(*cut).limit(limit + 1).collect()
    columns = [[f.name, f.dataType.simpleString()] for f in fields]
    return columns, [[_text(v) for v in row] for row in rows[:limit]], len(rows) > limit


def _columns_of(partition: Partition) -> list[tuple[str, str]]:
    table = partition.table
    batch = [(table.batch_id_partition_col, "int")] if table.batch_id_partition_col else []
    return struct_fields(table.ddl) + batch if table.ddl else []


# Spark's conditions for a folder or file that is not there, and for one that is no Parquet.
_GONE = re.compile(r"PATH_NOT_FOUND|FileNotFoundException|NoSuchKey|404 Not Found")
_NOT_PARQUET = re.compile(
    r"CANNOT_READ_FILE_FOOTER|FAILED_READ_FILE|not a Parquet file|CORRUPTED|"
    r"PARQUET_COLUMN_DATA_TYPE_MISMATCH|is not a Parquet file"
)
# A data file's name as Spark's messages give it, without the sentence's full stop after it.
_FILE = re.compile(r"(?<=/)(part-[\w-]+(?:\.[\w-]+)*?)(?=\.?[\s'\"\],;:]|\.?$)")


def _reason(exc: Exception) -> str:
    """What went wrong, in words a user can act on, naming a file but never a folder."""
    text = str(exc)
    if _GONE.search(text):
        return "its files are not there any more: removed outside BDRE"
    if _NOT_PARQUET.search(text):
        found = _FILE.search(text)
        return f"{found.group(1) if found else 'a file of it'} is not a readable Parquet file"
    condition = getattr(exc, "getCondition", lambda: None)() or type(exc).__name__
    return f"Spark could not read it ({condition}); the Spark worker's log has the details"


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    value = _plain_nested(value)
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=_plain, ensure_ascii=False)
    elif isinstance(value, datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, (bytes, bytearray)):
        text = bytes(value[: MAX_TEXT // 2]).hex() + ("…" if len(value) > MAX_TEXT // 2 else "")
    else:
        text = str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _plain_nested(value: Any) -> Any:
    """A Spark ``Row`` (a struct) as the dict of its fields, in lists and maps too."""
    as_dict = getattr(value, "asDict", None)
    if callable(as_dict):
        return {k: _plain_nested(v) for k, v in as_dict().items()}
    if isinstance(value, list):
        return [_plain_nested(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain_nested(v) for k, v in value.items()}
    return value


def _plain(value: Any) -> str:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return repr(value)
