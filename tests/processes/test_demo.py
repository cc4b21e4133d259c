"""The demo set-up behind `make demo` (the non-interactive part)."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from processes.models import Process

pytestmark = pytest.mark.django_db


def test_demo_command_prints_the_login_once_and_is_idempotent(capsys):
    call_command("demo")
    first = capsys.readouterr().out
    match = re.search(r"login:\s+demo / (\S+)", first)
    assert match, first
    call_command("demo")
    second = capsys.readouterr().out
    assert match.group(1) not in second
    assert "password unchanged" in second
    assert Process.objects.filter(parent__isnull=True).count() == 3


def test_demo_pipeline_links_ingest_to_shred_to_daily():
    call_command("demo", stdout=io.StringIO())
    shred = Process.objects.get(name="clickstream_shred_events")
    daily = Process.objects.get(name="clickstream_daily_summary")
    assert [p.name for p in shred.enqueuing_processes.all()] == ["clickstream_ingest"]
    assert [p.name for p in daily.enqueuing_processes.all()] == ["clickstream_shred"]
    assert daily.batch_cut_pattern == "EOD"
    assert shred.process_type.job_kind == "spark.shred"
    location = Process.objects.get(name="clickstream_ingest_scan").properties.get(key="location")
    assert location.value.startswith("file:///") and location.value.endswith("/landing")
