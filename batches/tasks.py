"""Thin Celery tasks of the batches app: the published catalog's periodic sync
(``batches.catalog``, docs/operations.md "The catalog")."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import beat_init

from batches import catalog

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
