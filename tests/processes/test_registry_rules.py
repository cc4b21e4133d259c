"""Each rule of the registry is said once, by ``processes.registry``: the API (a pipeline
document, a template, one process) and the registration pages only parse, and answer the
registry's own message on the field at fault. A step's message is ``"<step>: ..."`` in the
API and ``...`` on that step's row of the page."""

from __future__ import annotations

import pytest

from processes import registry
from processes.models import Process, ProcessTemplate
from tests.helpers.api import api_as
from tests.helpers.factories import JobFactory, StepFactory
from tests.helpers.jobs import CALL, JOB_TYPE, STEP_TYPE
from tests.helpers.pages import client_as

# backends: constraints (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]

NO_SPACES = "Use letters, digits, '_', '.' and '-' only (no spaces)."
CUT = "A cut pattern needs an upstream job."


def document(team, steps=None, **job) -> dict:
    steps = steps if steps is not None else [{"name": "a"}, {"name": "b"}]
    return {
        "name": "orders",
        "application": team.application.name,
        "process_type": JOB_TYPE,
        "steps": [{"process_type": CALL, **step} for step in steps],
        **job,
    }


def page(team, steps=None, **job) -> dict:
    steps = steps if steps is not None else [{"name": "a"}, {"name": "b"}]
    data = {
        "application": team.application.pk,
        "name": "orders",
        "job_type": JOB_TYPE,
        "max_retries": 3,
        "lease_seconds": 3600,
        "timezone": "UTC",
        "step-TOTAL_FORMS": max(len(steps), 1),
        "step-INITIAL_FORMS": 0,
        **job,
    }
    for i, step in enumerate(steps):
        data.update({f"step-{i}-kind": CALL, **{f"step-{i}-{k}": v for k, v in step.items()}})
    return data


def through_api(team, body: dict, url: str = "/api/v1/processes/pipeline/") -> dict:
    answer = api_as(team.developer).post(url, body, format="json")
    assert answer.status_code == 400, answer.content
    return answer.json()


def through_page(team, data: dict, url: str = "/jobs/new/"):
    answer = client_as(team.developer).post(url, data)
    assert answer.status_code == 200
    return answer.context


def nothing_registered() -> None:
    assert not Process.objects.filter(name="orders").exists()


def test_a_job_name_the_model_refuses(team):
    assert through_api(team, document(team, name="has space")) == {"name": [NO_SPACES]}
    assert through_page(team, page(team, name="has space"))["form"].errors["name"] == [NO_SPACES]
    long = "x" * 129
    too_long = "Ensure this value has at most 128 characters (it has 129)."
    assert through_api(team, document(team, name=long)) == {"name": [too_long]}
    assert through_page(team, page(team, name=long))["form"].errors["name"] == [too_long]
    nothing_registered()


def test_a_step_name_the_model_refuses(team):
    steps = [{"name": "a b"}, {"name": "c"}]
    assert through_api(team, document(team, steps)) == {"name": [f"a b: {NO_SPACES}"]}
    rows = through_page(team, page(team, steps))["steps"].forms
    assert rows[0].errors["name"] == [NO_SPACES]
    nothing_registered()


def test_a_job_needs_at_least_one_step(team):
    message = "A job needs at least one step"
    assert through_api(team, document(team, [])) == {"steps": [message]}
    context = through_page(team, page(team, []))
    assert context["form"].non_field_errors() == [f"steps: {message}"]
    nothing_registered()


def test_a_template_needs_at_least_one_step(team):
    body = document(team, [])
    assert through_api(team, body, "/api/v1/templates/") == {
        "steps": ["A template needs at least one step"]
    }


def test_a_cut_pattern_needs_an_upstream_job(team):
    steps = [{"name": "a", "batch_cut_pattern": "EOD"}, {"name": "b"}]
    assert through_api(team, document(team, steps)) == {"batch_cut_pattern": [f"a: {CUT}"]}
    rows = through_page(team, page(team, steps))["steps"].forms
    assert rows[0].errors["batch_cut_pattern"] == [CUT]
    job = JobFactory(bus_domain=team.application)
    one = {
        "name": "cutter",
        "bus_domain": team.application.pk,
        "process_type": STEP_TYPE,
        "parent": job.pk,
        "batch_cut_pattern": "EOD",
    }
    assert through_api(team, one, "/api/v1/processes/") == {"batch_cut_pattern": [CUT]}
    nothing_registered()


def test_an_unknown_next_step(team):
    steps = [{"name": "a", "next": ["nowhere"]}, {"name": "b"}]
    message = "unknown steps ['nowhere']"
    assert through_api(team, document(team, steps)) == {"next_processes": [f"a: {message}"]}
    rows = through_page(team, page(team, [{"name": "a", "after": "nowhere"}, {"name": "b"}]))
    assert rows["steps"].forms[0].errors["after"] == [message]
    nothing_registered()


def test_steps_that_form_a_cycle(team):
    message = "The steps form a cycle: a -> b -> a"
    steps = [{"name": "a", "next": ["b"]}, {"name": "b", "next": ["a"]}]
    assert through_api(team, document(team, steps)) == {"next_processes": [message]}
    rows = [{"name": "a", "after": "b"}, {"name": "b", "after": "a"}]
    context = through_page(team, page(team, rows))
    assert context["form"].non_field_errors() == [f"next_processes: {message}"]
    nothing_registered()


def test_a_step_type_where_a_job_type_is_wanted(team):
    # The page offers job types only; the pipeline and the template say the same.
    message = "python-callable is a step type, not a job type."
    assert through_api(team, document(team, process_type="python-callable")) == {
        "process_type": [message]
    }
    body = document(team, process_type="python-callable")
    assert through_api(team, body, "/api/v1/templates/") == {"process_type": [message]}
    nothing_registered()


def test_a_job_type_where_a_step_type_is_wanted(team):
    message = "generic-job is a job type, not a step type."
    steps = [{"name": "a", "process_type": "generic-job"}, {"name": "b"}]
    assert through_api(team, document(team, steps)) == {"process_type": [f"a: {message}"]}
    body = document(team, steps)
    assert through_api(team, body, "/api/v1/templates/") == {"process_type": [f"a: {message}"]}
    assert not ProcessTemplate.objects.exists()
    nothing_registered()


def test_an_upstream_that_is_a_step(team):
    # The page offers jobs only; the pipeline and one process at a time say the same.
    a_step = StepFactory(parent=JobFactory(bus_domain=team.application), name="some_step")
    message = "some_step is a step, not a job: an upstream must be a job."
    steps = [{"name": "a", "upstream": [a_step.pk]}, {"name": "b"}]
    assert through_api(team, document(team, steps)) == {"enqueuing_processes": [f"a: {message}"]}
    job = JobFactory(bus_domain=team.application)
    one = {
        "name": "consumer",
        "bus_domain": team.application.pk,
        "process_type": STEP_TYPE,
        "parent": job.pk,
        "enqueuing_processes": [a_step.pk],
    }
    assert through_api(team, one, "/api/v1/processes/") == {"enqueuing_processes": [message]}
    nothing_registered()


def test_a_job_made_from_a_template_has_a_name_of_at_most_100_characters(team):
    template = registry.save_template(
        registry.TemplateSpec(
            "tmpl", team.application, JOB_TYPE, [registry.TemplateStepSpec("s", CALL)]
        )
    )
    name = "x" * 101
    message = "Ensure this value has at most 100 characters (it has 101)."
    url = f"/api/v1/templates/{template.pk}/instantiate/"
    assert through_api(team, {"name": name}, url) == {"name": [message]}
    data = {
        "template": template.pk,
        "application": team.application.pk,
        "name": name,
        "timezone": "UTC",
    }
    context = through_page(team, data, "/jobs/from-template/")
    assert context["form"].errors["name"] == [message]
    assert not Process.objects.filter(name=name).exists()


def test_a_template_name_the_model_refuses(team, make_job):
    body = document(team, name="has space")
    assert through_api(team, body, "/api/v1/templates/") == {"name": [NO_SPACES]}
    job = make_job("orders")
    answer = client_as(team.developer).post(
        f"/jobs/{job.pk}/save-template/", {"name": "has space"}, follow=True
    )
    assert NO_SPACES.replace("'", "&#x27;") in answer.content.decode()
    assert not ProcessTemplate.objects.exists()


def test_a_property_group_longer_than_its_column(team):
    group = "g" * 65
    message = "orders: a config group has at most 64 characters; gggggggggggggggggggg... has 65."
    body = document(team, properties={group: {"k": "v"}})
    assert through_api(team, body) == {"properties": [message]}
    context = through_page(team, page(team, properties=f"{group}.k = v"))
    assert context["form"].errors["properties"] == [message]
    nothing_registered()
    job = JobFactory(bus_domain=team.application, name="orders")
    one = {"process": job.pk, "config_group": group, "key": "k", "value": "v"}
    assert through_api(team, one, "/api/v1/properties/") == {"config_group": [message]}


def test_a_property_key_longer_than_its_column(team):
    key = "k" * 129
    message = "a: a key has at most 128 characters; kkkkkkkkkkkkkkkkkkkk... has 129."
    steps = [{"name": "a", "properties": {"g": {key: "v"}}}, {"name": "b"}]
    assert through_api(team, document(team, steps)) == {"properties": [message]}
    rows = through_page(team, page(team, [{"name": "a", "properties": f"g.{key} = v"}]))
    assert rows["steps"].forms[0].errors["properties"] == [message.removeprefix("a: ")]
    nothing_registered()
    step = StepFactory(parent=JobFactory(bus_domain=team.application), name="a")
    one = {"process": step.pk, "config_group": "g", "key": key, "value": "v"}
    assert through_api(team, one, "/api/v1/properties/") == {"key": [message]}


@pytest.mark.parametrize("field", ["max_retries", "lease_seconds"])
def test_a_retry_count_or_a_lease_under_one(team, field):
    message = "Ensure this value is greater than or equal to 1."
    assert through_api(team, document(team, **{field: 0})) == {field: [message]}
    assert through_page(team, page(team, **{field: 0}))["form"].errors[field] == [message]
    nothing_registered()
    one = {"name": "orders", "bus_domain": team.application.pk, "process_type": JOB_TYPE, field: 0}
    assert through_api(team, one, "/api/v1/processes/") == {field: [message]}
    nothing_registered()
