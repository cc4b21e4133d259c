"""Master tables are seeded by migrations with BDRE's ids: the processes' ones (the batches'
and lineage's are in tests/batches/ and tests/lineage/)."""

from __future__ import annotations

import pytest

from processes.models import (
    ExecState,
    ExecStatus,
    ProcessType,
    ProcessTypeId,
    WorkflowKind,
    WorkflowType,
)
from tests.helpers.database import rows

pytestmark = pytest.mark.django_db


def test_exec_statuses_have_bdre_ids():
    assert rows(ExecStatus) == {
        1: "NOT_RUNNING",
        2: "RUNNING",
        3: "SUCCESS",
        4: "PAUSED",
        5: "SUSPENDED",
        6: "FAILED",
        7: "KILLED",
        8: "STARTED",
    }
    assert {s.value: s.name for s in ExecState} == rows(ExecStatus)


def test_process_type_ids_name_every_seeded_type():
    assert {t.value: t.label for t in ProcessTypeId} == rows(ProcessType)


def test_workflow_types():
    assert rows(WorkflowType) == {0: "steps", 1: "stand-alone", 2: "celery"}
    assert [k.value for k in WorkflowKind] == [0, 1, 2]


def test_every_job_kind_has_a_step_type_under_a_parent_type():
    step_types = ProcessType.objects.filter(parent_process_type__isnull=False)
    kinds = set(step_types.values_list("job_kind", flat=True))
    assert kinds == {
        "ingest.scan",
        "spark.load",
        "spark.cleanse",
        "spark.shred",
        "spark.sql",
        "spark.export",
        "python.callable",
    }
    for step_type in step_types:
        parent = step_type.parent_process_type
        assert parent.parent_process_type is None
        assert parent.job_kind == ""


def test_parent_types_have_no_job_kind():
    jobs = ProcessType.objects.filter(parent_process_type__isnull=True)
    assert set(jobs.values_list("id", flat=True)) == {1, 2, 3, 4, 5}
    assert set(jobs.values_list("job_kind", flat=True)) == {""}
