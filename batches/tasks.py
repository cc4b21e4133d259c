"""Thin Celery tasks of the batches app: the published catalog's periodic sync
(``batches.catalog``, docs/operations.md "The catalog"); a table's preview, read on the
Spark queue (``batches.preview``), and the removal of unused partitions on a store only
Hadoop reaches, there too (``batches.partitions``)."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import beat_init
from django.conf import settings
from django.db import transaction

from batches import catalog, partitions, preview
from batches.models import Partition, PartitionPreview

log = logging.getLogger(__name__)


@shared_task(name=catalog.SYNC_TASK)
def sync_catalog() -> dict:
    """Sync the catalog in a process of its own if a table or partition changed."""
    outcome = catalog.sync_if_changed()
    if outcome.ran:
        log.info("catalog synced (%s):\n%s", outcome.reason, outcome.output)
    return {"synced": outcome.ran, "reason": outcome.reason}


@beat_init.connect(dispatch_uid="bdre-catalog-sync-schedule")
def _schedule_the_sync(sender: object = None, **kwargs: object) -> None:
    """Beat keeps the sync in its schedule (or switched off, with BDRE_CATALOG=off)."""
    catalog.ensure_sync_schedule()


# A backstop for what the preview's own bound does not stop (its session's start, a call
# that hangs outside a Spark job): the read is recorded as stopped all the same.
@shared_task(
    name="batches.read_preview",
    soft_time_limit=settings.BDRE_PREVIEW_SECONDS + preview.RUNNING_MARGIN_SECONDS,
)
def read_preview(preview_id: int) -> str:
    """Read a preview's rows with this worker's Spark session, the steps' own."""
    from processes.step_kinds.spark_session import get_spark

    done = preview.read(preview_id, get_spark)
    return done.state if done is not None else "read already or given up"


@shared_task(name="batches.remove_unused_partitions")
def remove_unused_partitions(partition_ids: list[int]) -> list[int]:
    """Remove the files of these unused partitions, on a store only Hadoop reaches, with
    this worker's Spark session (queued by the reaper on the Spark queue that wrote them)."""
    from processes.step_kinds.spark_session import get_spark

    removed = partitions.remove_unused(spark=get_spark(), ids=partition_ids)
    if removed:
        log.info("removed the files of unused partitions %s", removed)
    return removed


def ask_preview(
    partition: Partition,
    rows: int = preview.DEFAULT_ROWS,
    by: Any = None,
) -> PartitionPreview:
    """The preview of ``partition`` (``preview.request``), its read queued on the Spark
    queue once the request is committed when it is a new one."""
    shown, new = preview.request(partition, rows, by)
    if new:
        transaction.on_commit(
            lambda: read_preview.apply_async((shown.pk,), queue=settings.BDRE_SPARK_QUEUE)
        )
    return shown
