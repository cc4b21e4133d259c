"""``registry.edit_job``: a registered job changed as a whole through the one-process
services, its workflow kept whole as steps come and go, all or nothing."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from bdre.errors import Conflict
from processes import registry
from processes.models import Process, Property
from processes.registry import JobEdit, NewStep, StepEdit
from processes.workflow import steps_in_order
from tests.helpers.jobs import CALL, build_job, callable_step

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(team) -> Process:
    return build_job(team, "orders", [callable_step(n) for n in ("extract", "load")])


def names(job: Process) -> list[str]:
    return [s.name for s in steps_in_order(job)]


def test_removing_the_first_step_leaves_the_job_starting_at_the_next(job):
    first = job.steps.get(name="extract")
    registry.edit_job(job.pk, JobEdit(name="orders", steps=[StepEdit(first.pk, remove=True)]))
    assert list(job.next_processes.values_list("name", flat=True)) == ["load"]
    assert names(job) == ["load"]


def test_new_steps_without_a_place_follow_one_another_at_the_end(job):
    registry.edit_job(
        job.pk,
        JobEdit(name="orders", new_steps=[NewStep("report", CALL), NewStep("publish", CALL)]),
    )
    assert names(job) == ["extract", "load", "report", "publish"]


def test_a_new_step_after_a_removed_one_is_refused_and_nothing_changes(job):
    load = job.steps.get(name="load")
    with pytest.raises(ValidationError) as refused:
        registry.edit_job(
            job.pk,
            JobEdit(
                name="renamed",
                properties={"owner": {"email": "x@example.com"}},
                steps=[StepEdit(load.pk, remove=True)],
                new_steps=[NewStep("report", CALL, after=["load"])],
            ),
        )
    assert refused.value.message_dict == {
        "next_processes": ["report: load: no such step in renamed."]
    }
    job.refresh_from_db()
    assert job.name == "orders" and not Process.objects.get(pk=load.pk).deleted
    assert not Property.objects.filter(process=job).exists()


def test_replace_properties_deletes_the_keys_left_out(job):
    registry.set_properties(job, {"owner": {"email": "a@example.com", "pager": "1"}})
    registry.replace_properties(job, {"owner": {"email": "b@example.com"}})
    assert list(Property.objects.filter(process=job).values_list("key", "value")) == [
        ("email", "b@example.com")
    ]


def test_the_jobs_new_retries_and_lease_reach_the_steps_that_kept_the_jobs_values(job):
    extract, load = job.steps.order_by("id")
    Process.objects.filter(pk=load.pk).update(lease_seconds=60)  # its own, set through the API
    registry.edit_job(job.pk, JobEdit(name="orders", max_retries=7, lease_seconds=900))
    extract.refresh_from_db()
    load.refresh_from_db()
    assert (extract.max_retries, extract.lease_seconds) == (7, 900)
    assert (load.max_retries, load.lease_seconds) == (7, 60)


def test_editing_a_job_deleted_meanwhile_is_a_conflict_not_a_crash(job):
    registry.delete_process(job.pk)
    with pytest.raises(Conflict, match="deleted meanwhile"):
        registry.edit_job(job.pk, JobEdit(name="orders"))


def test_links_turned_around_in_one_edit_are_no_cycle(team):
    """extract -> load becomes load -> extract: each link checked against the links as they
    are to be, not against the one the same edit takes away."""
    job = build_job(
        team,
        "turned",
        [callable_step("extract"), callable_step("load")],
        links={"extract": ["load"]},
    )
    extract, load = job.steps.get(name="extract"), job.steps.get(name="load")
    registry.edit_job(
        job.pk,
        JobEdit(
            name="turned",
            steps=[StepEdit(extract.pk, next=[]), StepEdit(load.pk, next=["extract"])],
        ),
    )
    assert names(job) == ["load", "extract"]
    # And the other way round, the step whose new link is listed first.
    registry.edit_job(
        job.pk,
        JobEdit(
            name="turned",
            steps=[StepEdit(extract.pk, next=["load"]), StepEdit(load.pk, next=[])],
        ),
    )
    assert names(job) == ["extract", "load"]
