"""Registering a job with its steps in one validated transaction."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from processes.models import Process, Property
from processes.registry import StepSpec
from tests.helpers.factories import BusDomainFactory, JobFactory, StepFactory
from tests.helpers.jobs import JOB_TYPE, STEP_TYPE, build_job

pytestmark = pytest.mark.django_db


def names(processes) -> list[str]:
    return sorted(p.name for p in processes)


def test_steps_are_chained_in_order_by_default(team):
    created = build_job(team, "orders", [StepSpec("a", STEP_TYPE), StepSpec("b", STEP_TYPE)])
    a, b = created.steps.order_by("id")
    assert names(created.next_processes.all()) == ["a"]
    assert names(a.next_processes.all()) == ["b"]
    assert names(b.next_processes.all()) == []
    assert a.bus_domain == created.bus_domain


def test_branches_and_joins(team):
    created = build_job(
        team,
        "orders",
        [
            StepSpec("extract", STEP_TYPE, next=["left", "right"]),
            StepSpec("left", STEP_TYPE, next=["join"]),
            StepSpec("right", STEP_TYPE, next=["join"]),
            StepSpec("join", STEP_TYPE, next=[]),
        ],
    )
    steps = {s.name: s for s in created.steps.all()}
    assert names(created.next_processes.all()) == ["extract"]
    assert names(steps["join"].previous_processes.all()) == ["left", "right"]


def test_upstream_properties_and_cut_pattern(team):
    upstream = JobFactory(bus_domain=team.application)
    created = build_job(
        team,
        "orders",
        [
            StepSpec(
                "daily",
                STEP_TYPE,
                upstream=[upstream.pk],
                batch_cut_pattern="EOD",
                properties={"sql": {"query": "SELECT 1"}},
            )
        ],
        properties={"run": {"owner": "me"}},
    )
    step = created.steps.get()
    assert list(step.enqueuing_processes.all()) == [upstream]
    assert list(upstream.downstream_steps.all()) == [step]
    assert Property.objects.get(process=step, config_group="sql", key="query").value == "SELECT 1"
    assert Property.objects.get(process=created, key="owner").value == "me"


@pytest.mark.parametrize(
    "steps,kwargs,field",
    [
        ([StepSpec("a", STEP_TYPE)], {"name": "has space"}, "name"),
        ([StepSpec("a", STEP_TYPE)], {"process_type_id": STEP_TYPE}, "process_type"),
        ([StepSpec("a", JOB_TYPE)], {}, "process_type"),
        ([], {}, "steps"),
        ([StepSpec("a", STEP_TYPE), StepSpec("a", STEP_TYPE)], {}, "steps"),
        ([StepSpec("a", STEP_TYPE, batch_cut_pattern="EOD")], {}, "batch_cut_pattern"),
        ([StepSpec("a", STEP_TYPE, next=["ghost"])], {}, "next_processes"),
        (
            [StepSpec("a", STEP_TYPE, next=["b"]), StepSpec("b", STEP_TYPE, next=["a"])],
            {},
            "next_processes",
        ),
    ],
)
def test_invalid_registrations_name_the_field_and_leave_nothing(team, steps, kwargs, field):
    before = Process.objects.count()
    with pytest.raises(ValidationError) as excinfo:
        build_job(team, kwargs.pop("name", "orders"), steps, **kwargs)
    assert field in excinfo.value.message_dict
    assert Process.objects.count() == before


def test_an_upstream_that_is_a_step_is_refused(team):
    step = StepFactory(parent=JobFactory(bus_domain=team.application))
    with pytest.raises(ValidationError) as excinfo:
        build_job(team, "orders", [StepSpec("a", STEP_TYPE, upstream=[step.pk])])
    assert "enqueuing_processes" in excinfo.value.message_dict


def test_a_duplicate_live_name_is_refused(team):
    # In another application of the same team: names are per team (tests/processes/
    # test_api_names.py has another team's names, which are free).
    JobFactory(name="orders", bus_domain=BusDomainFactory(team=team.group))
    with pytest.raises(ValidationError) as excinfo:
        build_job(team, "orders", [StepSpec("a", STEP_TYPE)])
    assert excinfo.value.message_dict == {
        "name": ["A process named orders exists already in team analytics."]
    }
