"""Batches, the queue, files and tables as REST resources (bdre.routes)."""

from __future__ import annotations

from batches.api import (
    ArchiveViewSet,
    BatchViewSet,
    FileViewSet,
    QueueViewSet,
    TableShareViewSet,
    TableViewSet,
)
from batches.models import BatchStatus
from bdre.routes import register_master, router

router.register("batches", BatchViewSet, basename="batch")
router.register("queue", QueueViewSet, basename="queue")
router.register("archive", ArchiveViewSet, basename="archive")
router.register("files", FileViewSet, basename="file")
router.register("tables", TableViewSet, basename="table")
router.register("table-shares", TableShareViewSet, basename="table-share")
register_master("batch-statuses", BatchStatus)
