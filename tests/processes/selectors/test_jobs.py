"""A job's page as its selector reads it (processes/selectors/jobs.py): what the page shows,
in a fixed number of queries however many steps, properties, runs and queue rows it has."""

from __future__ import annotations

import pytest

from processes import lifecycle, registry, schedules
from processes.models import ExecState
from processes.schedules import Schedule
from processes.selectors.jobs import LISTED, job_page

pytestmark = pytest.mark.django_db


def test_properties_by_step_and_group_without_the_schedule_group(make_job):
    job = make_job("orders", steps=2)
    first, second = job.steps.order_by("id")
    registry.set_properties(first, {"options": {"memory": "2g"}})
    registry.set_properties(second, {"options": {"cores": "2"}, "other": {"k": "v"}})
    schedules.set_schedule(job.pk, Schedule(every_seconds=60))
    page = job_page(job)
    assert [s.pk for s in page.steps] == [first.pk, second.pk]
    keys = {
        name: {group: [p.key for p in rows] for group, rows in groups.items()}
        for name, groups in page.properties.items()
    }
    assert keys == {
        first.name: {"options": ["memory"]},
        second.name: {"options": ["cores"], "other": ["k"]},
    }
    assert page.schedule.every_seconds == 60


def test_the_newest_runs_first_and_the_running_one(make_job):
    job = make_job("orders")
    for _ in range(LISTED + 2):
        lifecycle.init_job(job.pk, 1)
        lifecycle.halt_job(job.pk)
    running = lifecycle.init_job(job.pk, 1).instance_exec_id
    page = job_page(job)
    assert len(page.runs) == LISTED
    assert page.runs[0].pk == running
    assert [r.pk for r in page.runs] == sorted((r.pk for r in page.runs), reverse=True)
    assert page.running is not None and page.running.pk == running
    assert page.running.exec_state_id == ExecState.RUNNING


def test_its_queries_do_not_grow_with_steps_and_properties(make_job, django_assert_max_num_queries):
    small = make_job("small")
    big = make_job("big", steps=6)
    for step in big.steps.all():
        registry.set_properties(step, {"g": {f"k{i}": "v" for i in range(5)}})
    with django_assert_max_num_queries(30) as counted:
        job_page(small)
    with django_assert_max_num_queries(len(counted.captured_queries)):
        job_page(big)
