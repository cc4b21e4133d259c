"""Registering through REST: processes one at a time with every rule answered on its field,
whole pipelines in one request, export and import, templates, properties, and a pipeline
registered through the API run to the end through the lifecycle API."""

from __future__ import annotations

import pytest

from processes import registry
from processes.models import ExecState, InstanceExec, Process
from tests.helpers.api import api_as
from tests.helpers.factories import JobFactory, StepFactory
from tests.helpers.jobs import STEP_TYPE

# backends: the registry's constraints through the API (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


@pytest.fixture
def dev(team):
    return api_as(team.developer)


def pipeline(team, name="clicks", **extra) -> dict:
    return {
        "name": name,
        "application": team.application.name,
        "process_type": "generic-job",
        "description": "two steps",
        "properties": {"alerts": {"email": "ops@example.com"}},
        "steps": [
            {
                "name": f"{name}_extract",
                "process_type": "python-callable",
                "properties": {"python": {"callable": "tests.processes.callables.sleep"}},
            },
            {
                "name": f"{name}_report",
                "process_type": 51,
                "properties": {"python": {"callable": "tests.processes.callables.sleep"}},
            },
        ],
        **extra,
    }


# --- one process at a time ----------------------------------------------------------------


def test_a_job_and_its_step_are_created_and_linked(team, dev):
    job = dev.post(
        "/api/v1/processes/",
        {"name": "nightly", "bus_domain": team.application.pk, "process_type": 5},
        format="json",
    )
    assert job.status_code == 201, job.content
    step = dev.post(
        "/api/v1/processes/",
        {
            "name": "nightly_work",
            "bus_domain": team.application.pk,
            "process_type": STEP_TYPE,
            "parent": job.json()["id"],
        },
        format="json",
    )
    assert step.status_code == 201, step.content
    linked = dev.patch(
        f"/api/v1/processes/{job.json()['id']}/",
        {"next_processes": [step.json()["id"]]},
        format="json",
    )
    assert linked.status_code == 200
    detail = dev.get(f"/api/v1/processes/{job.json()['id']}/").json()
    assert [s["name"] for s in detail["steps"]] == ["nightly_work"]
    assert (detail["schedule"]["cron"], detail["schedule"]["every_seconds"]) == ("", None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "has space", "process_type": 5}, "name"),
        ({"name": "lonely_step", "process_type": STEP_TYPE}, "parent"),
        ({"name": "x", "process_type": 999}, "process_type"),
        ({"name": "x", "process_type": 5, "max_retries": 0}, "max_retries"),
        ({"name": "x", "process_type": 5, "bus_domain": "nope"}, "bus_domain"),
    ],
)
def test_an_invalid_process_is_a_400_naming_the_field(team, dev, body, field):
    response = dev.post(
        "/api/v1/processes/", {"bus_domain": team.application.pk, **body}, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()


def test_a_job_with_a_parent_is_refused(team, dev):
    other = JobFactory(bus_domain=team.application)
    body = {"name": "j", "bus_domain": team.application.pk, "process_type": 5, "parent": other.pk}
    response = dev.post("/api/v1/processes/", body, format="json")
    assert response.status_code == 400
    assert "job type" in response.json()["parent"][0]


def test_an_upstream_that_is_a_step_is_refused(team, dev):
    job = JobFactory(bus_domain=team.application)
    a_step = StepFactory(parent=JobFactory(bus_domain=team.application))
    body = {
        "name": "consumer",
        "bus_domain": team.application.pk,
        "process_type": STEP_TYPE,
        "parent": job.pk,
        "enqueuing_processes": [a_step.pk],
    }
    response = dev.post("/api/v1/processes/", body, format="json")
    assert response.status_code == 400
    assert "is a step, not a job" in response.json()["enqueuing_processes"][0]


def test_a_cut_pattern_without_upstream_is_refused(team, dev):
    job = JobFactory(bus_domain=team.application)
    body = {
        "name": "cutter",
        "bus_domain": team.application.pk,
        "process_type": STEP_TYPE,
        "parent": job.pk,
        "batch_cut_pattern": "EOD",
    }
    response = dev.post("/api/v1/processes/", body, format="json")
    assert response.status_code == 400
    assert "upstream" in response.json()["batch_cut_pattern"][0]


def test_a_cycle_in_next_processes_is_refused(team, dev, make_job):
    a, _b, c = make_job("loop", steps=3).steps.order_by("id")
    response = dev.patch(f"/api/v1/processes/{c.pk}/", {"next_processes": [a.pk]}, format="json")
    assert response.status_code == 400
    assert "cycle" in response.json()["next_processes"][0]
    assert list(c.next_processes.all()) == []


def test_a_step_cannot_link_to_another_jobs_step(team, dev, make_job):
    mine = make_job("mine").steps.get()
    theirs = make_job("theirs").steps.get()
    response = dev.patch(
        f"/api/v1/processes/{mine.pk}/", {"next_processes": [theirs.pk]}, format="json"
    )
    assert response.status_code == 400
    assert "same job" in response.json()["next_processes"][0]


def test_a_taken_name_is_refused(team, dev, make_job):
    make_job("taken")
    body = {"name": "taken", "bus_domain": team.application.pk, "process_type": 5}
    response = dev.post("/api/v1/processes/", body, format="json")
    assert response.status_code == 400
    assert "exists already" in response.json()["name"][0]


def test_moving_a_job_to_an_application_of_another_team_is_refused(team, dev, make_job):
    job = make_job("stay")
    response = dev.patch(
        f"/api/v1/processes/{job.pk}/", {"bus_domain": team.other_application.pk}, format="json"
    )
    assert response.status_code == 400
    assert "bus_domain" in response.json()


def test_deleting_a_step_keeps_the_workflow_whole(team, make_job):
    a, b, c = make_job("chain", steps=3).steps.order_by("id")
    response = api_as(team.admin).delete(f"/api/v1/processes/{b.pk}/")
    assert response.status_code == 204
    assert list(a.next_processes.all()) == [c]
    assert Process.objects.get(pk=b.pk).deleted


def test_deleting_a_running_job_is_a_conflict(team, make_job):
    from processes import lifecycle

    job = make_job("busy")
    lifecycle.init_job(job.pk, 1)
    response = api_as(team.admin).delete(f"/api/v1/processes/{job.pk}/")
    assert response.status_code == 409
    assert "running" in response.json()["detail"]


def test_deleting_a_job_others_consume_is_a_conflict(team, make_job):
    upstream = make_job("source")
    make_job("sink", upstream=[upstream])
    response = api_as(team.admin).delete(f"/api/v1/processes/{upstream.pk}/")
    assert response.status_code == 409
    assert "sink_s1" in response.json()["detail"]


def test_deleting_an_application_in_use_is_a_conflict(team, make_job):
    make_job("user_of_app")
    response = api_as(team.admin).delete(f"/api/v1/applications/{team.application.pk}/")
    assert response.status_code == 409
    assert "processes" in response.json()["detail"]


def test_process_lists_filter_by_application_kind_and_name(team, dev, make_job):
    make_job("alpha")
    make_job("beta")
    jobs = dev.get("/api/v1/processes/", {"is_job": "true", "name": "alp"}).json()
    assert [p["name"] for p in jobs["results"]] == ["alpha"]
    steps = dev.get("/api/v1/processes/", {"application": "web", "is_job": "false"}).json()
    assert {p["name"] for p in steps["results"]} == {"alpha_s1", "beta_s1"}
    ordered = dev.get("/api/v1/processes/", {"ordering": "-name", "is_job": "true"}).json()
    assert [p["name"] for p in ordered["results"]] == ["beta", "alpha"]


# --- whole pipelines, export and import ---------------------------------------------------


def test_a_pipeline_is_registered_in_one_request(team, dev, make_job):
    upstream = make_job("landing")
    body = pipeline(team, schedule={"cron": "0 3 * * *", "timezone": "Europe/Paris"})
    body["steps"][0]["upstream"] = ["landing"]
    body["steps"][0]["batch_cut_pattern"] = "EOD"
    response = dev.post("/api/v1/processes/pipeline/", body, format="json")
    assert response.status_code == 201, response.content
    job = Process.objects.get(pk=response.json()["id"])
    extract, report = job.steps.order_by("id")
    assert list(job.next_processes.all()) == [extract]
    assert list(extract.next_processes.all()) == [report]
    assert list(extract.enqueuing_processes.all()) == [upstream]
    assert job.properties.get(config_group="alerts").value == "ops@example.com"
    assert response.json()["schedule"]["cron"] == "0 3 * * *"
    assert response.json()["schedule"]["timezone"] == "Europe/Paris"


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda b: b["steps"][0].update(upstream=["clicks_report"]), "upstream"),
        (lambda b: b["steps"][0].update(next=["nowhere"]), "next"),
        (lambda b: b["steps"][1].update(next=["clicks_extract"]), "cycle"),
        (lambda b: b["steps"][0].update(batch_cut_pattern="EOD"), "batch_cut_pattern"),
        (lambda b: b["steps"][0].update(process_type="generic-job"), "process_type"),
        (lambda b: b.update(steps=[]), "steps"),
        (lambda b: b.update(application="ads"), "application"),
        (lambda b: b.update(name="with space"), "name"),
    ],
)
def test_an_invalid_pipeline_is_a_400_and_registers_nothing(team, dev, make_job, change, where):
    make_job("clicks_report")  # a live step named clicks_report_s1; the job's name is taken
    Process.objects.filter(name="clicks_report").update(name="clicks_report_job")
    make_job("other")
    Process.objects.filter(name="other_s1").update(name="clicks_report")  # a step, by name
    before = Process.objects.count()
    body = pipeline(team)
    change(body)
    response = dev.post("/api/v1/processes/pipeline/", body, format="json")
    assert response.status_code == 400, response.content
    assert where in response.content.decode()
    assert Process.objects.count() == before


def test_a_viewer_cannot_register_a_pipeline(team):
    response = api_as(team.viewer).post(
        "/api/v1/processes/pipeline/", pipeline(team), format="json"
    )
    assert response.status_code == 403
    assert not Process.objects.filter(name="clicks").exists()


def test_export_then_import_gives_the_same_job(team, dev, make_job):
    make_job("landing")
    body = pipeline(team, schedule={"every_seconds": 600, "on_upstream": True})
    body["steps"][0]["upstream"] = ["landing"]
    job_id = dev.post("/api/v1/processes/pipeline/", body, format="json").json()["id"]
    exported = dev.get(f"/api/v1/processes/{job_id}/export/").json()
    assert exported["format"] == "bdre.pipeline/1"
    assert exported["steps"][0]["upstream"] == ["landing"]
    assert exported["steps"][0]["next"] == ["clicks_report"]
    assert exported["schedule"]["every_seconds"] == 600

    # Into a fresh installation the names are free; here, delete the original first.
    assert api_as(team.admin).delete(f"/api/v1/processes/{job_id}/").status_code == 204
    imported = dev.post("/api/v1/processes/import/", exported, format="json")
    assert imported.status_code == 201, imported.content
    again = dev.get(f"/api/v1/processes/{imported.json()['id']}/export/").json()
    assert again == exported


def test_exporting_a_step_says_to_export_its_job(team, dev, make_job):
    step = make_job("x").steps.get()
    response = dev.get(f"/api/v1/processes/{step.pk}/export/")
    assert response.status_code == 404
    assert response.json()["code"] == 102


def test_an_export_is_read_by_import_job_on_the_command_line(team, make_job, tmp_path):
    import json

    from django.core.management import call_command

    job = make_job("cli_job", steps=2)
    document = registry.export_job(job)
    registry.delete_process(job.pk)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(document))
    call_command("import_job", str(path))
    imported = Process.objects.get(name="cli_job", deleted=False)
    assert registry.export_job(imported) == document


def test_a_pipeline_registered_through_the_api_runs_to_the_end(team, dev):
    job_id = dev.post("/api/v1/processes/pipeline/", pipeline(team), format="json").json()["id"]
    steps = [s["id"] for s in dev.get(f"/api/v1/processes/{job_id}/").json()["steps"]]

    def post(path, body=None):
        return dev.post(f"/api/v1/processes/{path}", body or {}, format="json")

    init = post(f"{job_id}/init-job/", {"max_batch": 1})
    assert init.status_code == 201, init.content
    for step in steps:
        sub = post(f"{step}/init-step/")
        assert sub.status_code == 201
        assert post(f"{step}/halt-step/").status_code == 204
    assert post(f"{job_id}/halt-job/").status_code == 204
    run = dev.get(f"/api/v1/runs/{init.json()['instance_exec_id']}/").json()
    assert run["exec_state_name"] == "SUCCESS"
    assert [s["process"] for s in run["steps"]] == steps
    assert all(s["exec_state"] == ExecState.SUCCESS for s in run["steps"])
    assert InstanceExec.objects.filter(process_id=job_id).count() == 1


# --- templates and properties -------------------------------------------------------------


def test_a_job_is_made_from_a_template(team, dev, make_job):
    make_job("landing")
    template = dev.post(
        "/api/v1/templates/",
        {
            "name": "daily_load",
            "application": "web",
            "process_type": "generic-job",
            "properties": {"alerts": {"email": "a@example.com"}},
            "steps": [
                {"name": "load", "process_type": "generic-load", "batch_cut_pattern": "EOD"},
                {
                    "name": "check",
                    "process_type": "python-callable",
                    "properties": {"python": {"callable": "x.y"}},
                },
            ],
        },
        format="json",
    )
    assert template.status_code == 201, template.content
    assert [s["next"] for s in template.json()["steps"]] == [["check"], []]
    made = dev.post(
        f"/api/v1/templates/{template.json()['id']}/instantiate/",
        {
            "name": "orders",
            "upstream": {"load": ["landing"]},
            "properties": {"check.python": {"callable": "tests.processes.callables.sleep"}},
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    job = Process.objects.get(pk=made.json()["id"])
    load, check = job.steps.order_by("id")
    assert (load.name, check.name) == ("orders_load", "orders_check")
    assert load.batch_cut_pattern == "EOD"
    assert load.enqueuing_processes.get().name == "landing"
    assert check.properties.get(key="callable").value == "tests.processes.callables.sleep"
    assert job.properties.get(key="email").value == "a@example.com"
    assert job.process_template_id == template.json()["id"]
    assert load.process_template.name == "load"


def test_a_template_with_a_cut_needs_upstream_when_instantiated(team, dev):
    template = registry.save_template(
        registry.TemplateSpec(
            "cut",
            team.application,
            5,
            [registry.TemplateStepSpec("load", 53, batch_cut_pattern="EOD")],
        )
    )
    response = dev.post(
        f"/api/v1/templates/{template.pk}/instantiate/", {"name": "cutjob"}, format="json"
    )
    assert response.status_code == 400
    assert "upstream" in response.json()


def test_properties_filter_by_process_and_group(team, dev, make_job):
    job = make_job("props")
    step = job.steps.get()
    registry.set_properties(step, {"options": {"memory": "2g"}, "other": {"k": "v"}})
    rows = dev.get("/api/v1/properties/", {"process": step.pk, "config_group": "options"}).json()
    assert [(r["key"], r["value"]) for r in rows["results"]] == [("memory", "2g")]
    duplicate = dev.post(
        "/api/v1/properties/",
        {"process": step.pk, "config_group": "options", "key": "memory", "value": "1g"},
        format="json",
    )
    assert duplicate.status_code == 400
