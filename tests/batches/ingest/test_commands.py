"""``manage.py scan_files``: runs the ingestion job and prints a summary."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from batches.models import File

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("landing", ["local"], indirect=True)
def test_scan_files_prints_the_summary(ingest_job, landing):
    _job, step, _ = ingest_job()
    landing.put("1.txt")
    landing.put("2.txt")
    landing.put("3.txt_current")
    out, err = io.StringIO(), io.StringIO()
    call_command("scan_files", "--process-id", str(step.pk), stdout=out, stderr=err)
    text = out.getvalue()
    assert "registered           2" in text
    assert "skipped in flight    1" in text
    assert "late                 0" in text
    assert "listed" in err.getvalue()  # progress
    assert File.objects.count() == 2


@pytest.mark.parametrize("landing", ["local"], indirect=True)
def test_scan_files_reports_a_broken_location(ingest_job, landing):
    # Inside the granted root, but no folder is there.
    job, _step, _ = ingest_job(location=landing.location + "/nonexistent")
    with pytest.raises(CommandError, match="failed: StorageError"):
        call_command("scan_files", "--process-id", str(job.pk), stdout=io.StringIO())
