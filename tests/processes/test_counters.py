"""What a run counted, in words (processes/counters.py): the run page labels each counter and
says how the rows read became the rows written; the dashboard counts, per job, the rows its
steps set aside in the last 24 hours (bad, invalid, duplicates, quarantined)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from processes import counters
from processes.models import Process
from tests.helpers.factories import HiveTableFactory, PartitionFactory
from tests.helpers.jobs import CLEANSE
from tests.helpers.lifecycle import steps_of
from tests.helpers.runs import job_run, step_run

pytestmark = pytest.mark.django_db

SHRED = {
    "files": 2,
    "rows_in": 800,
    "rows_out": 463,
    "bad_rows": 80,
    "dup_in_batch_natural": 200,
    "dup_cross_batch_natural": 57,
    "dup_in_batch_synthetic": 3,
    "dup_cross_batch_synthetic": 0,
    "callable_note": 1,
}


def test_a_shred_runs_numbers_are_labelled_and_add_up_in_one_sentence():
    shown = counters.labelled(SHRED)
    assert [c.key for c in shown][:4] == ["files", "rows_in", "rows_out", "bad_rows"]
    assert shown[-1].label == "callable note", "a counter of its own, under its own name"
    assert counters.how_they_add_up(SHRED) == (
        "800 rows read = 463 written + 80 bad + 257 duplicates dropped (200 within the batch, "
        "57 already delivered before). 3 written events had an id another event had, and "
        "were given a new one (they are different events, so they are kept)."
    )
    assert counters.set_aside(SHRED) == {"bad": 80, "duplicates": 257}


def test_numbers_that_do_not_add_up_are_called_out_and_a_run_without_them_says_nothing():
    lost = {"rows_in": 100, "rows_out": 90, "bad_rows": 5}
    assert counters.how_they_add_up(lost).endswith(
        "These add up to 95, not 100: rows were lost or added."
    )
    assert counters.how_they_add_up({"files": 3}) == ""
    # A callable's own counters can be anything: what is no number is left out.
    odd = {"rows_in": 10, "rows_out": 10, "dup_in_batch_synthetic": 2}
    assert counters.how_they_add_up({**odd, "dup_cross_batch_synthetic": None}).startswith(
        "10 rows read = 10 written. 2 written events had an id"
    )
    assert counters.how_they_add_up({"rows_in": "many", "rows_out": 1}) == ""


def test_the_run_page_labels_counters_and_the_dashboard_counts_rows_set_aside(
    make_job, team, client
):
    job = make_job("shred", steps=1)
    (step,) = steps_of(job)
    now = timezone.now()
    run = job_run(job, start_ts=now - timedelta(minutes=5))
    step_run(run, step, **SHRED)
    old = job_run(job, start_ts=now - timedelta(hours=30))
    step_run(old, step, bad_rows=1000)
    client.force_login(team.viewer)

    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<span class="counter" title="bad_rows">bad rows, set aside with their reason <b>80' in (
        page
    )
    assert "800 rows read = 463 written + 80 bad + 257 duplicates dropped" in page
    # A cleanse's bad rows are invalid ones; a drop expectation's rows are quarantined.
    pages = make_job("pages", steps=1)
    (cleanse,) = steps_of(pages)
    Process.objects.filter(pk=cleanse.pk).update(process_type_id=CLEANSE)
    checked = step_run(job_run(pages, start_ts=now), cleanse, rows_in=64, rows_out=60, bad_rows=4)
    # Two rows quarantined, one of them failing both drop rules: two rows, not three.
    checked.checks = [
        {"rule": "https_url", "action": "drop", "checked": 60, "failed": 2},
        {"rule": "has_price", "action": "drop", "checked": 60, "failed": 1},
    ]
    checked.save()
    PartitionFactory(
        table=HiveTableFactory(bus_domain=team.application, table_name="pages_quarantine"),
        step_run=checked,
        rows=2,
    )
    dashboard = client.get("/").content.decode()
    assert "<td>80 bad · 257 duplicates</td>" in dashboard, "the last 24 hours only"
    assert "<td>4 invalid · 2 quarantined</td>" in dashboard
