"""Registering jobs through the forms: steps, links, upstream jobs, properties and schedule;
validation messages on the fields; jobs from templates; templates saved and deleted;
schedules edited. As each role and as an outsider."""

from __future__ import annotations

import pytest

from processes import schedules
from processes.models import Process, ProcessTemplate, ProcessTypeId
from tests.helpers.jobs import CALL
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db


def form(team, name="orders", steps=None, **job):
    steps = steps if steps is not None else [{"name": f"{name}_load"}, {"name": f"{name}_report"}]
    data = {
        "application": team.application.pk,
        "name": name,
        "job_type": 5,
        "max_retries": 3,
        "lease_seconds": 3600,
        "timezone": "UTC",
        "step-TOTAL_FORMS": len(steps),
        "step-INITIAL_FORMS": 0,
        "step-MIN_NUM_FORMS": 1,
        "step-MAX_NUM_FORMS": 1000,
        "register": "1",
        **job,
    }
    for i, step in enumerate(steps):
        data.update({f"step-{i}-kind": CALL, **{f"step-{i}-{k}": v for k, v in step.items()}})
    return data


def test_a_developer_registers_a_job_with_two_steps(team):
    upstream = Process.objects.create(
        name="ingest", bus_domain=team.application, process_type_id=ProcessTypeId.GENERIC_JOB
    )
    data = form(
        team,
        steps=[
            {
                "name": "orders_load",
                "upstream": [upstream.pk],
                "properties": "callable.path = tests.processes.callables.sleep",
            },
            {"name": "orders_report"},
        ],
        every_seconds=600,
        properties="owner.team = analytics",
    )
    answer = client_as(team.developer).post("/jobs/new/", data)
    job = Process.objects.get(name="orders", parent=None)
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{job.pk}/"
    load, report = job.steps.order_by("id")
    assert list(job.next_processes.all()) == [load]
    assert list(load.next_processes.all()) == [report]
    assert list(load.enqueuing_processes.all()) == [upstream]
    assert load.properties.get(config_group="callable").value == "tests.processes.callables.sleep"
    assert job.properties.get(config_group="owner", key="team").value == "analytics"
    assert schedules.schedule_of(job.pk).every_seconds == 600


def test_a_job_of_one_step_is_said_registered_with_1_step(team):
    answer = client_as(team.developer).post(
        "/jobs/new/", form(team, steps=[{"name": "orders_load"}]), follow=True
    )
    assert "orders is registered with 1 step." in answer.content.decode()


def test_empty_step_rows_are_ignored_and_add_a_step_keeps_the_input(team):
    client = client_as(team.developer)
    grown = client.post("/jobs/new/", {**form(team, steps=[{"name": "x_1"}]), "add_step": "1"})
    assert grown.status_code == 200
    page = grown.content.decode()
    assert 'name="step-TOTAL_FORMS" value="2"' in page and 'value="x_1"' in page
    assert not Process.objects.filter(name="orders").exists()
    data = form(team, steps=[{"name": "orders_only"}, {"name": "", "kind": ""}])
    assert client.post("/jobs/new/", data).status_code == 302
    assert Process.objects.get(name="orders", parent=None).steps.count() == 1


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"name": "has space"}, "name", "no spaces"),
        ({"properties": "no equals sign"}, "properties", "group.key = value"),
        ({"cron": "* * * * *", "every_seconds": 60}, None, "not both"),
    ],
)
def test_invalid_input_is_answered_on_the_field(team, change, field, message):
    answer = client_as(team.developer).post("/jobs/new/", form(team, **change))
    assert answer.status_code == 200
    assert message in answer.content.decode()
    if field:
        assert field in answer.context["form"].errors
    assert not Process.objects.filter(name="orders").exists()


def test_a_step_error_from_the_registry_lands_on_that_step(team):
    data = form(team, steps=[{"name": "a", "after": "nowhere"}, {"name": "b"}])
    answer = client_as(team.developer).post("/jobs/new/", data)
    assert answer.status_code == 200
    errors = [f.errors for f in answer.context["steps"].forms]
    assert "after" in errors[0] and "nowhere" in str(errors[0]["after"])


def test_a_name_already_taken_is_said_on_the_name(team):
    client = client_as(team.developer)
    client.post("/jobs/new/", form(team))
    answer = client.post("/jobs/new/", form(team, steps=[{"name": "other_1"}]))
    assert "exists already in team analytics" in str(answer.context["form"].errors["name"])


def test_viewers_and_outsiders_cannot_register_in_the_team(team):
    assert client_as(team.viewer).get("/jobs/new/").status_code == 403
    answer = client_as(team.outsider).post("/jobs/new/", form(team))
    assert answer.status_code == 200  # the outsider's own team has no such application
    assert "application" in answer.context["form"].errors
    assert not Process.objects.filter(name="orders").exists()


def test_a_job_is_saved_as_a_template_and_a_new_job_made_from_it(team):
    client = client_as(team.developer)
    client.post("/jobs/new/", form(team))
    job = Process.objects.get(name="orders", parent=None)
    client.post(f"/jobs/{job.pk}/save-template/", {"name": "two_steps"})
    template = ProcessTemplate.objects.get(name="two_steps", parent=None)
    listing = client.get("/templates/").content.decode()
    assert "two_steps" in listing and "load → report" in listing
    answer = client.post(
        "/jobs/from-template/",
        {
            "template": template.pk,
            "application": team.application.pk,
            "name": "returns",
            "timezone": "UTC",
            "properties": "load.callable.path = tests.processes.callables.sleep",
        },
    )
    made = Process.objects.get(name="returns", parent=None)
    assert answer["Location"] == f"/jobs/{made.pk}/"
    assert sorted(made.steps.values_list("name", flat=True)) == ["returns_load", "returns_report"]
    load = made.steps.get(name="returns_load")
    assert load.properties.get(config_group="callable").value == "tests.processes.callables.sleep"


def test_only_an_admin_deletes_a_template(team):
    client_as(team.developer).post("/jobs/new/", form(team))
    job = Process.objects.get(name="orders", parent=None)
    client_as(team.developer).post(f"/jobs/{job.pk}/save-template/", {"name": "tmpl"})
    template = ProcessTemplate.objects.get(name="tmpl", parent=None)
    assert "Delete" not in client_as(team.developer).get("/templates/").content.decode()
    assert client_as(team.developer).post(f"/templates/{template.pk}/delete/").status_code == 403
    assert client_as(team.outsider).post(f"/templates/{template.pk}/delete/").status_code == 404
    client_as(team.admin).post(f"/templates/{template.pk}/delete/")
    assert ProcessTemplate.objects.get(pk=template.pk).deleted


def test_the_schedule_is_edited_paused_and_resumed_by_a_developer(team):
    client = client_as(team.developer)
    client.post("/jobs/new/", form(team))
    job = Process.objects.get(name="orders", parent=None)
    client.post(f"/jobs/{job.pk}/schedule/", {"cron": "0 3 * * *", "timezone": "Europe/Paris"})
    assert schedules.schedule_of(job.pk).cron == "0 3 * * *"
    client.post(f"/jobs/{job.pk}/pause/")
    assert not schedules.schedule_of(job.pk).enabled
    client.post(f"/jobs/{job.pk}/resume/")
    assert schedules.schedule_of(job.pk).enabled
    bad = client.post(
        f"/jobs/{job.pk}/schedule/", {"cron": "", "timezone": "Mars/Base"}, follow=True
    )
    assert "unknown time zone" in bad.content.decode()
    assert client_as(team.viewer).post(f"/jobs/{job.pk}/schedule/", {}).status_code == 403


def test_a_spark_option_a_step_may_not_set_is_shown_on_the_form(team):
    data = form(
        team,
        steps=[
            {
                "name": "orders_sql",
                "kind": 56,  # spark.sql
                "properties": "sql.query = SELECT 1 AS x\nspark.spark.executor.memory = 8g",
            }
        ],
    )
    answer = client_as(team.developer).post("/jobs/new/", data)
    assert answer.status_code == 200
    assert "spark option spark.executor.memory: it is fixed when the worker&#x27;s Spark" in (
        answer.content.decode()
    )
    assert not Process.objects.filter(name="orders").exists()
