"""A job's page: its steps, properties, schedule, workflow, last runs, queue and last check."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from batches.models import BatchConsumpQueue
from lineage import graphs
from processes import scan_gate, schedules
from processes.models import SCHEDULE_GROUP, ExecState, InstanceExec, Process, Property

# The newest runs and queue rows the page lists; the runs page and the queue page list all.
LISTED = 20


@dataclass
class JobPage:
    job: Process
    steps: list[Process]
    # step (or job) name -> config group -> its properties; the schedule group is left out:
    # the page's schedule section shows it.
    properties: dict[str, dict[str, list[Property]]]
    schedule: schedules.Schedule
    workflow: graphs.Graph
    runs: list[InstanceExec]
    queue: list[BatchConsumpQueue]
    last_checked: dict[str, Any] | None
    running: InstanceExec | None


def job_page(job: Process) -> JobPage:
    """What the page of ``job`` (a job the user may see) shows."""
    steps = list(job.steps.filter(deleted=False).select_related("process_type").order_by("id"))
    properties: dict[str, dict[str, list[Property]]] = defaultdict(lambda: defaultdict(list))
    for prop in (
        Property.objects.filter(process__in=[job, *steps])
        .exclude(config_group=SCHEDULE_GROUP)
        .select_related("process")
    ):
        properties[prop.process.name][prop.config_group].append(prop)
    return JobPage(
        job=job,
        steps=steps,
        properties={name: dict(groups) for name, groups in properties.items()},
        schedule=schedules.schedule_of(job.pk),
        workflow=graphs.workflow_graph(job),
        runs=list(
            InstanceExec.objects.filter(process=job, parent__isnull=True)
            .select_related("exec_state")
            .order_by("-id")[:LISTED]
        ),
        queue=list(
            BatchConsumpQueue.objects.filter(process__parent=job)
            .select_related("process", "batch_state")
            .order_by("-id")[:LISTED]
        ),
        last_checked=scan_gate.last_checked(job),
        running=InstanceExec.objects.filter(process=job, exec_state_id=ExecState.RUNNING).first(),
    )
