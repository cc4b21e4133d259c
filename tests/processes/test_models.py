"""Constraints the database enforces on the registry (run on SQLite and on PostgreSQL)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from processes.models import ExecState, InstanceExec, Property
from tests.helpers.database import rejected
from tests.helpers.factories import InstanceExecFactory, JobFactory, PropertyFactory, StepFactory

# backends: constraints (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


def test_second_running_instance_of_a_process_is_rejected():
    job = JobFactory()
    InstanceExecFactory(process=job, exec_state_id=ExecState.RUNNING)
    assert rejected(lambda: InstanceExecFactory(process=job, exec_state_id=ExecState.RUNNING))
    assert InstanceExec.objects.filter(process=job).count() == 1


def test_finished_instances_do_not_count_against_the_running_one():
    job = JobFactory()
    for state in (ExecState.SUCCESS, ExecState.FAILED, ExecState.FAILED, ExecState.KILLED):
        InstanceExecFactory(process=job, exec_state_id=state)
    InstanceExecFactory(process=job, exec_state_id=ExecState.RUNNING)
    assert InstanceExec.objects.filter(process=job).count() == 5


def test_running_instances_of_different_processes_coexist():
    InstanceExecFactory(exec_state_id=ExecState.RUNNING)
    InstanceExecFactory(exec_state_id=ExecState.RUNNING)
    assert InstanceExec.objects.filter(exec_state_id=ExecState.RUNNING).count() == 2


def test_finishing_a_run_frees_the_slot_for_the_next():
    job = JobFactory()
    run = InstanceExecFactory(process=job, exec_state_id=ExecState.RUNNING)
    InstanceExec.objects.filter(pk=run.pk).update(
        exec_state_id=ExecState.SUCCESS, end_ts=timezone.now()
    )
    InstanceExecFactory(process=job, exec_state_id=ExecState.RUNNING)


def test_live_process_names_are_unique():
    job = JobFactory(name="daily_load")
    assert rejected(lambda: JobFactory(name="daily_load", bus_domain=job.bus_domain))


def test_a_deleted_process_frees_its_name():
    JobFactory(name="daily_load", deleted=True)
    JobFactory(name="daily_load", deleted=True)
    JobFactory(name="daily_load")


def test_process_name_with_a_space_is_rejected_by_the_database():
    assert rejected(lambda: JobFactory(name="daily load"))


def test_process_name_with_a_space_fails_validation():
    from django.core.exceptions import ValidationError

    job = JobFactory.build(name="daily load")
    with pytest.raises(ValidationError) as excinfo:
        job.full_clean()
    assert "name" in excinfo.value.message_dict


def test_property_is_unique_per_process_group_and_key():
    prop = PropertyFactory(config_group="scan", key="location")
    assert rejected(
        lambda: PropertyFactory(process=prop.process, config_group="scan", key="location")
    )
    PropertyFactory(process=prop.process, config_group="other", key="location")
    PropertyFactory(config_group="scan", key="location")
    assert Property.objects.filter(key="location").count() == 3


def test_max_retries_must_be_positive():
    assert rejected(lambda: JobFactory(max_retries=0))


def test_a_step_belongs_to_a_job():
    step = StepFactory()
    assert not step.is_job
    assert step.parent.is_job
    assert list(step.parent.steps.all()) == [step]
