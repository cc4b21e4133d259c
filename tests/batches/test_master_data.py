"""The batches' master table is seeded by migrations with BDRE's ids, and the seed batch 0."""

from __future__ import annotations

import pytest

from batches.models import Batch, BatchState, BatchStatus
from tests.helpers.database import rows

pytestmark = pytest.mark.django_db


def test_batch_statuses_have_bdre_ids():
    assert rows(BatchStatus) == {
        0: "NEW",
        1: "PROCESSED",
        2: "ACCESSED",
        3: "FAILED",
        4: "DISCARDED",
    }
    assert {s.value: s.name for s in BatchState} == rows(BatchStatus)


def test_seed_batch_zero_exists():
    assert Batch.objects.filter(pk=0, batch_type="seed").exists()
