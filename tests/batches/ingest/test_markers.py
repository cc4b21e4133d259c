"""A scan step's marker moved back through the API: the next scan lists again and registers
what it had passed over (a late upload below the marker), nothing twice; and the marker never
moves forward."""

from __future__ import annotations

import pytest
from django.utils import timezone

from batches.models import File, ScanState
from processes import orchestrator
from tests.helpers.api import api_as
from tests.helpers.factories import grant_root
from tests.helpers.jobs import build_job, scan_step

pytestmark = pytest.mark.django_db


@pytest.fixture
def scanned(team, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    grant_root(team.group, landing)
    # reconcile_every 0: only the marker decides what is listed
    job = build_job(team, "ingest", [scan_step("ingest_0", landing, reconcile_every="0")])
    for name in ("a.csv", "b.csv", "c.csv"):
        (landing / name).write_text(name)
    assert orchestrator.run_job(job.pk).succeeded
    return job.steps.get(), landing


def test_a_marker_moved_back_finds_a_late_file_and_registers_nothing_twice(team, scanned):
    step, landing = scanned
    assert ScanState.objects.get(process=step).marker == "c.csv"
    client = api_as(team.developer)
    url = f"/api/v1/processes/{step.pk}/reset-marker/"
    preview = client.post(url, {"key": "a.csv", "preview": True}, format="json")
    assert preview.status_code == 200, preview.content
    assert preview.json() | {"location": ""} == {
        "step_id": step.pk,
        "location": "",
        "marker": "c.csv",
        "new_marker": "a.csv",
        "registered_after": 2,
    }
    assert ScanState.objects.get(process=step).marker == "c.csv"  # a preview changes nothing
    (landing / "b2.csv").write_text("late")  # below the marker: the scans pass it by
    assert orchestrator.run_job(step.parent_id).succeeded
    assert File.objects.count() == 3
    assert client.post(url, {"key": "a.csv"}, format="json").status_code == 200
    assert orchestrator.run_job(step.parent_id).succeeded
    assert sorted(File.objects.values_list("path", flat=True)) == sorted(
        (landing / n).as_uri() for n in ("a.csv", "b.csv", "b2.csv", "c.csv")
    )
    assert ScanState.objects.get(process=step).marker == "c.csv"


def test_since_a_time_lists_again_from_the_first_file_registered_then(team, scanned):
    step, _ = scanned
    answer = api_as(team.developer).post(
        f"/api/v1/processes/{step.pk}/reset-marker/",
        {"since": timezone.now().replace(year=2000).isoformat(), "preview": True},
        format="json",
    )
    assert answer.status_code == 200 and answer.json()["new_marker"] == ""


def test_a_marker_does_not_move_forward_and_input_is_checked(team, scanned):
    step, _ = scanned
    client = api_as(team.developer)
    url = f"/api/v1/processes/{step.pk}/reset-marker/"
    forward = client.post(url, {"key": "z.csv"}, format="json")
    assert forward.status_code == 400 and "only moves back" in str(forward.json())
    both = client.post(url, {"key": "a", "since": timezone.now().isoformat()}, format="json")
    assert both.status_code == 400
    assert ScanState.objects.get(process=step).marker == "c.csv"


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_only_the_teams_developers_move_a_marker(team, scanned, who, status):
    step, _ = scanned
    answer = api_as(getattr(team, who)).post(
        f"/api/v1/processes/{step.pk}/reset-marker/", {"key": ""}, format="json"
    )
    assert answer.status_code == status
    assert ScanState.objects.get(process=step).marker == "c.csv"


def test_a_step_sharing_its_location_counts_and_dates_only_the_files_it_takes(team, scanned):
    _step, landing = scanned
    other = build_job(team, "pages", [scan_step("pages_0", landing, include="*.tsv")]).steps.get()
    (landing / "d.tsv").write_text("d")
    from batches.ingest.scan import scan

    assert scan(other.pk).registered == 1  # d.tsv, the other step's only file
    api = api_as(team.developer)
    plan = api.post(
        f"/api/v1/processes/{other.pk}/reset-marker/", {"key": "", "preview": True}, format="json"
    ).json()
    assert plan["registered_after"] == 1  # not a.csv, b.csv, c.csv: the first step's


def test_a_step_that_is_no_scan_has_no_marker_to_move(team):
    step = build_job(team, "not_a_scan", 1).steps.get()
    answer = api_as(team.developer).post(
        f"/api/v1/processes/{step.pk}/reset-marker/", {"key": "", "preview": True}, format="json"
    )
    assert answer.status_code == 404, answer.content
    assert answer.json() == {
        "code": 103,
        "message": f"Invalid sub-process: {step.pk} is not a live ingest.scan step",
    }
