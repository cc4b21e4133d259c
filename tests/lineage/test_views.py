"""A table's lineage page: the expectations its writers checked, batch after batch."""

from __future__ import annotations

import pytest

from processes.models import ExecState, Property
from tests.helpers.factories import LineageNodeFactory
from tests.helpers.pages import client_as
from tests.helpers.runs import job_run, step_run

pytestmark = pytest.mark.django_db


def checked(failed: int, *, database: str = "lake") -> list[dict]:
    return [
        {"database": database, "table": "out", "rule": "one_each", "rule_text": "unique(id)",
         "kind": "unique", "action": "fail", "checked": 4, "passed": 4 - failed,
         "failed": failed, "samples": []},
    ]  # fmt: skip


def test_a_tables_page_charts_each_expectation_across_its_batches(team, make_job):
    job = make_job("report")
    # The rule, as a Spark step that writes lake.out declares it (this placeholder step
    # stands for one; its runs' results are what the page reads).
    Property.objects.create(
        process=job.steps.get(), config_group="expect", key="out.one_each", value="fail: unique(id)"
    )
    runs = []
    for failed, state in ((0, ExecState.SUCCESS), (2, ExecState.FAILED)):
        run = job_run(job, state=state)
        step = step_run(run, job.steps.get())
        step.checks = checked(failed)
        step.save()
        runs.append(run)
    # Another database's table of the same name, and another team's: not this table's.
    other = step_run(job_run(job), job.steps.get())
    other.checks = checked(3, database="staging")
    other.save()
    theirs = make_job.func(team.other_application, "theirs")
    Property.objects.create(
        process=theirs.steps.get(), config_group="expect", key="out.one_each", value="warn: a"
    )
    foreign = step_run(job_run(theirs), theirs.steps.get())
    foreign.checks = checked(1)
    foreign.save()

    node = LineageNodeFactory(team=team.group, qualified_name="lake.out")
    page = client_as(team.viewer).get(f"/lineage/nodes/{node.pk}/").content.decode()
    [section] = page.split('data-testid="table-check"')[1:]
    assert "one_each <code>unique(id)</code>" in section
    assert f'fails the step · last: 2 of 4 rows failed, <a href="/runs/{runs[1].pk}/">' in section
    first, second = (r.target_batch_id for r in runs)
    assert f"<title>batch {first}: 4 passed</title>" in section
    assert f"<title>batch {second}: 2 passed</title>" in section
    assert f"<title>batch {second}: 2 failed</title>" in section
    assert section.count("<rect") == 3  # two batches: 4 passed; 2 passed and 2 failed
