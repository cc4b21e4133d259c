"""Two scans of one location at once, in two processes: each file is registered once."""

from __future__ import annotations

import multiprocessing
import time

import pytest
from django.db import connections

from batches.ingest.scan import scan
from batches.models import BatchConsumpQueue, File

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def _scan_at(step_id: int, start_at: float) -> int:
    connections.close_all()
    time.sleep(max(0.0, start_at - time.time()))
    try:
        return scan(step_id).registered
    finally:
        connections.close_all()


@pytest.mark.parametrize("landing", ["local", "s3"], indirect=True)
def test_two_scans_at_once_register_each_file_once(ingest_job, landing):
    _job, step, consumer = ingest_job(page_size=7)
    for i in range(120):
        landing.put(f"{i:04d}.txt", f"event {i}\n".encode())
    connections.close_all()
    start_at = time.time() + 1.5
    with multiprocessing.get_context("fork").Pool(2) as pool:
        registered = pool.starmap(_scan_at, [(step.pk, start_at)] * 2)
    assert sum(registered) == 120
    assert File.objects.count() == 120
    assert File.objects.values("path").distinct().count() == 120
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 120
