"""A step kind is one module: its :class:`~processes.step_kinds.StepKind` spec and its body.
This test module is one. ``toy.copy`` copies the files its step claimed into a folder of
the team's, a folder per batch. No other file of BDRE names it, yet it is registered,
checked, located, run, lineaged and replayed as the kinds BDRE ships are; the fixture adds
the rows its seed migration would (its ``ProcessType`` and its lineage query type)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from batches.locations import StepLocations, team_landing
from lineage import openlineage
from lineage.models import LineageQuery, LineageQueryType
from lineage.steps import StepLineage, Write, folder_of
from processes import orchestrator, replay
from processes.models import InstanceExec, ProcessLog, ProcessType, ProcessTypeId, Property
from processes.registry import StepSpec
from processes.step_kinds import (
    Counters,
    Prop,
    PropertyGroups,
    RefusedProperty,
    StepContext,
    StepKind,
    register,
)
from tests.helpers.api import api_as
from tests.helpers.jobs import build_job, scan_step

pytestmark = pytest.mark.django_db

TOY_TYPE = 99  # its seed migration's ids
TOY_QUERY_KIND = 99


def copy_files(context: StepContext) -> Counters:
    props = context.properties("copy")
    folder = props["folder"].rstrip("/")
    out = Path(folder.removeprefix("file://")) / f"batch_id={context.target_batch_id}"
    if out.exists():  # a rebuilt batch replaces its folder
        shutil.rmtree(out)
    out.mkdir(parents=True)
    sources = sorted({folder_of(file.path) for file in context.files})
    context.record_input(*sources)
    for file in context.files:
        path = Path(file.path.removeprefix("file://"))
        shutil.copy(path, out / f"{props['prefix']}-{path.name}")

    def lineage() -> StepLineage:
        copied = Write(folder, ["line"])
        for source in sources:
            copied.feed(source, "line", "line", "copy")
        return StepLineage(f"toy.copy: {', '.join(sources)} into {folder}", [copied])

    context.record_lineage(lineage)
    return {"files": len(context.files)}


def check_prefix(properties: PropertyGroups) -> None:
    prefix = str(properties.get("copy", {}).get("prefix", "copy"))
    if not prefix.isalnum():
        raise RefusedProperty(f"copy.prefix must be letters and digits, got {prefix!r}")


def copied_to(properties: PropertyGroups) -> list[str]:
    folder = str(properties.get("copy", {}).get("folder") or "")
    return [folder.rstrip("/")] if folder else []


KIND = register(
    StepKind(
        "toy.copy",
        copy_files,
        properties={
            "copy": {
                "folder": Prop(help="the folder the files are copied to"),
                "prefix": Prop("copy", "put before each copied file's name"),
            }
        },
        locations=StepLocations("copy", ("folder",)),
        query_kind=TOY_QUERY_KIND,
        checks=(check_prefix,),
        destinations=copied_to,
    )
)


@pytest.fixture(autouse=True)
def landing_of_its_own(settings, tmp_path):
    settings.BDRE_LANDING = tmp_path / "landing"


@pytest.fixture
def toy_type(db):
    ProcessType.objects.create(
        id=TOY_TYPE,
        name="toy-copy",
        parent_process_type_id=ProcessTypeId.GENERIC_JOB,
        job_kind="toy.copy",
    )
    LineageQueryType.objects.create(id=TOY_QUERY_KIND, name="toy_copy")


def toy_pipeline(team, **copy: str) -> dict:
    return {
        "name": "copier",
        "application": team.application.name,
        "process_type": "generic-job",
        "steps": [{"name": "copier_copy", "process_type": "toy-copy", "properties": copy}],
    }


def register_toy(team, **copy: str):
    body = toy_pipeline(team, **copy)
    return api_as(team.developer).post("/api/v1/processes/pipeline/", body, format="json")


def out_folder(team_id: int) -> Path:
    return team_landing(team_id) / "copies"


def test_a_toy_step_is_registered_and_its_properties_checked_as_its_spec_says(team, toy_type):
    inside = out_folder(team.group.pk).as_uri()
    refused = {
        "copy.prefix must be letters and digits": {"folder": inside, "prefix": "../x"},
        str(team_landing(team.group.pk).as_uri()): {"folder": "file:///etc"},  # the roots named
    }
    for message, copy in refused.items():
        response = register_toy(team, copy=copy)
        assert response.status_code == 400, response.content
        assert message in response.content.decode()
    not_spark = register_toy(team, copy={"folder": inside}, spark={"spark.cores.max": "2"})
    assert not_spark.status_code == 400
    assert "only Spark steps" in not_spark.content.decode()
    assert register_toy(team, copy={"folder": inside}).status_code == 201


def test_a_toy_property_changed_behind_the_registry_fails_the_run_before_it_copies(team, toy_type):
    landing = team_landing(team.group.pk) / "in"
    landing.mkdir(parents=True)
    (landing / "a.txt").write_text("one\n")
    scan = build_job(team, "grab", [scan_step("grab_scan", landing)])
    copy = {"copy": {"folder": out_folder(team.group.pk).as_uri()}}
    spec = StepSpec("copier_copy", TOY_TYPE, upstream=[scan.pk], properties=copy)
    toy = build_job(team, "copier", [spec])
    Property.objects.create(process=toy.steps.get(), config_group="copy", key="prefix", value="..")
    assert orchestrator.run_job(scan.pk).succeeded
    outcome = orchestrator.run_job(toy.pk)
    assert not outcome.succeeded
    assert outcome.error.startswith("RefusedProperty: copy.prefix must be letters and digits")
    run = InstanceExec.objects.get(process=toy.steps.get())
    assert ProcessLog.objects.filter(instance_exec=run, message_id="property.refused").exists()
    assert not out_folder(team.group.pk).exists()


def test_a_toy_step_outside_its_teams_roots_is_reported_by_check_locations(team, toy_type):
    assert (
        register_toy(team, copy={"folder": out_folder(team.group.pk).as_uri()}).status_code == 201
    )
    Property.objects.filter(key="folder").update(value="file:///etc")  # behind the registry
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("check_locations", stdout=out, stderr=io.StringIO())
    assert "copy.folder=file:///etc" in out.getvalue()


@pytest.fixture
def copied(team, toy_type):
    """A scan of the landing folder, and a toy step copying each batch it registers: run."""
    landing = team_landing(team.group.pk) / "in"
    landing.mkdir(parents=True)
    (landing / "a.txt").write_text("one\ntwo\n")
    scan = build_job(team, "grab", [scan_step("grab_scan", landing)])
    copy = {"copy": {"folder": out_folder(team.group.pk).as_uri(), "prefix": "c"}}
    toy = build_job(
        team, "copier", [StepSpec("copier_copy", TOY_TYPE, upstream=[scan.pk], properties=copy)]
    )
    assert orchestrator.run_job(scan.pk).succeeded
    outcome = orchestrator.run_job(toy.pk)
    assert outcome.succeeded, outcome.error
    return toy, outcome, landing


def test_a_toy_step_runs_on_the_default_queue_and_records_what_it_read_and_wrote(copied):
    toy, outcome, landing = copied
    step = toy.steps.get()
    assert orchestrator.queue_of(step) == settings.BDRE_QUEUE  # not a Spark kind
    batch = outcome.target_batch_id
    written = out_folder(toy.bus_domain.team_id) / f"batch_id={batch}" / "c-a.txt"
    assert written.read_text() == "one\ntwo\n"
    run = InstanceExec.objects.get(process=step)
    assert run.counters == {"files": 1}
    assert run.inputs == [landing.as_uri()]


def test_a_toy_step_run_has_its_lineage_and_its_openlineage_datasets(copied):
    toy, _, landing = copied
    run = InstanceExec.objects.get(process=toy.steps.get())
    query = LineageQuery.objects.get(instance_exec=run)
    assert (query.query_type_id, query.parse_error) == (TOY_QUERY_KIND, "")
    folder = out_folder(toy.bus_domain.team_id).as_uri()
    edges = {
        (r.src_node.qualified_name, r.target_node.qualified_name) for r in query.relations.all()
    }
    assert (f"{landing.as_uri()}.line", f"{folder}.line") in edges
    start = openlineage.run_event(run.pk, "START")  # before it ran: what its spec names
    assert [d["name"] for d in start["outputs"]] == [str(out_folder(toy.bus_domain.team_id))]
    event = openlineage.run_event(run.pk, "COMPLETE")
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [("file", str(landing))]
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == (
        "file",
        str(out_folder(toy.bus_domain.team_id)),
    )
    assert "columnLineage" in output["facets"]


def test_a_toy_steps_batch_reprocessed_lists_and_replaces_its_folder(copied):
    toy, outcome, _ = copied
    batch = outcome.target_batch_id
    plan = replay.plan_reprocess_batch(batch)
    (rebuild,) = plan.rebuilds
    folder = out_folder(toy.bus_domain.team_id).as_uri()
    assert f"{folder}/batch_id={batch}" in rebuild.partitions
    replay.put_back(plan)
    again = orchestrator.run_job(toy.pk)
    assert again.succeeded and again.target_batch_id == batch
    assert again.steps == {toy.steps.get().pk: {"files": 1}}
