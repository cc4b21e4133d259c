"""Provenance through the demo pipeline (ingest -> shred -> daily SQL): a partition of the
semantic table traces back to the exact landing files, and a landing file forward to the
partitions it fed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from batches.models import File, HiveTable
from lineage.graphs import provenance
from processes import demo, orchestrator
from processes.models import Property

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def demo_run(settings, tmp_path, spark):
    settings.VAR_DIR = tmp_path
    settings.BDRE_LANDING = tmp_path / "landing"
    setup = demo.set_up_demo()
    ingest, shred, daily = setup.ingest, setup.shred, setup.daily
    # The demo waits for files to be 5 seconds old; these are written whole at once.
    Property.objects.filter(process__parent=ingest, key="min_age_seconds").update(value="0")
    first, _ = demo.generate_landing(
        demo.landing_folder(setup.team), files=2, events=200, in_flight=False
    )
    assert orchestrator.run_job(ingest.pk).succeeded
    shredded = orchestrator.run_job(shred.pk)
    assert shredded.succeeded, shredded.error
    # The next day's file closes the first day, which the daily summary then sums.
    demo.generate_landing(
        demo.landing_folder(setup.team),
        files=1,
        events=50,
        day=demo.FIRST_DAY + timedelta(days=1),
        in_flight=False,
    )
    for job in (ingest, shred):
        assert orchestrator.run_job(job.pk).succeeded
    summed = orchestrator.run_job(daily.pk)
    assert summed.succeeded, summed.error
    return first, shredded, summed


def test_a_partition_traces_back_to_its_files_and_a_file_forward_to_its_partitions(demo_run):
    files, shredded, summed = demo_run
    assert HiveTable.objects.filter(table_name="daily_page_views").exists()
    trace = provenance.trace(summed.target_batch_id, provenance.UP)
    assert sorted(path.rsplit("/", 1)[-1] for _, path in trace.upstream_files()) == sorted(
        f.name for f in files
    )
    jobs = {trace.batches[h.target].job for h in trace.hops}
    assert jobs == {"clickstream_shred", "clickstream_daily"}
    assert {h.step for h in trace.hops} == {
        "clickstream_shred_events",
        "clickstream_daily_summary",
    }
    assert shredded.target_batch_id in {h.source for h in trace.hops}

    # ... and a landing file leads forward to the partitions it fed (one pipeline run for
    # both directions: it takes a minute of Spark).
    landing = File.objects.get(path__endswith=files[0].name)
    forward = provenance.from_file(landing.pk)
    assert forward.downstream_batches() == sorted(
        [shredded.target_batch_id, summed.target_batch_id]
    )
    assert forward.batches[summed.target_batch_id].job == "clickstream_daily"
