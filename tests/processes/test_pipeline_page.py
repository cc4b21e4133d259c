"""The pipeline page: every job a user may see as one graph, upstream to downstream, each job
coloured by its last run with its queue, the batches that went along each link and those
waiting on it; an application's jobs alone on request. Driven through the lifecycle as a
scheduler drives it."""

from __future__ import annotations

import re

import pytest

from processes.models import Process
from tests.helpers.lifecycle import run_job, steps_of

pytestmark = pytest.mark.django_db


def run(job: Process, *, fail: bool = False) -> None:
    """A run of ``job`` over every batch waiting for it, its step failing with ``fail``."""
    run_job(job, max_batch=10**9, fail_step=steps_of(job)[0] if fail else None)


def nodes(page: str) -> dict[str, str]:
    """job name -> the state its node is coloured by."""
    found = re.findall(r'data-state="([^"]*)">\s*<title>([^<·]+?) ·', page)
    return {name.strip(): state for state, name in found}


def test_the_pipeline_shows_every_job_from_upstream_to_downstream_with_its_last_run(
    team, make_job, client
):
    ingest = make_job("ingest", steps=1)
    shred = make_job("shred", steps=1, upstream=[ingest])
    daily = make_job("daily", steps=1, upstream=[shred])
    export = make_job("export", steps=1, upstream=[daily])
    run(ingest)
    run(shred)  # consumes ingest's batch
    run(ingest)  # a second batch, waiting for shred
    run(daily, fail=True)  # claimed shred's batch and failed: it waits again
    client.force_login(team.viewer)

    dashboard = client.get("/").content.decode()
    assert '<a class="small" href="/pipeline/">as a pipeline</a>' in dashboard
    page = client.get("/pipeline/").content.decode()
    assert nodes(page) == {
        "ingest": "SUCCESS",
        "shred": "SUCCESS",
        "daily": "FAILED",
        "export": "NOT RUN",
    }
    for job in (ingest, shred, daily, export):
        assert f'<a href="/jobs/{job.pk}/">' in page
    labels = re.findall(r'class="edge-label"[^>]*>([^<]*)<', page)
    assert sorted(labels) == ["1 in 24 h · 1 waiting", "1 waiting", "batches"]
    assert "4 jobs, 3 links between them." in page
    assert "manual · 1 waiting" in page, "shred's node: its schedule and its queue"


def test_a_users_pipeline_holds_only_his_teams_jobs_and_one_application_on_request(
    team, make_job, client
):
    from tests.helpers.jobs import build_job

    ingest = make_job("ingest", steps=1)
    make_job("shred", steps=1, upstream=[ingest])
    other = build_job(team.other_application, "ads_load", 1)
    client.force_login(team.viewer)
    page = client.get("/pipeline/").content.decode()
    assert set(nodes(page)) == {"ingest", "shred"}
    assert "Application:" not in page, "one application: nothing to choose"

    client.force_login(team.outsider)
    assert set(nodes(client.get("/pipeline/").content.decode())) == {"ads_load"}
    chosen = client.get("/pipeline/", {"application": team.other_application.pk})
    assert "Pipeline of ads" in chosen.content.decode()
    assert client.get("/pipeline/", {"application": team.application.pk}).status_code == 404
    for odd in ("x", "²", "9" * 30):
        assert client.get("/pipeline/", {"application": odd}).status_code == 404
    assert other.bus_domain_id == team.other_application.pk


def test_a_team_without_jobs_is_told_how_to_start(team, client):
    client.force_login(team.viewer)
    page = client.get("/pipeline/").content.decode()
    assert "No job in your teams yet" in page
    assert '<a href="/jobs/new/">register one</a>' in page
