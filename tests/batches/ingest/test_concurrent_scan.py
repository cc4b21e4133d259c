"""Two scans of one location at once, in two processes: each file is registered once."""

from __future__ import annotations

import pytest

from batches.ingest.scan import scan
from batches.models import BatchConsumpQueue, File
from tests.helpers.concurrency import in_children

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def _scan(step_id: int) -> int:
    return scan(step_id).registered


@pytest.mark.parametrize("landing", ["local", "s3"], indirect=True)
def test_two_scans_at_once_register_each_file_once(ingest_job, landing):
    _job, step, consumer = ingest_job(page_size=7)
    for i in range(120):
        landing.put(f"{i:04d}.txt", f"event {i}\n".encode())
    registered = in_children(_scan, [(step.pk,)] * 2)
    assert sum(registered) == 120
    assert File.objects.count() == 120
    assert File.objects.values("path").distinct().count() == 120
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 120
