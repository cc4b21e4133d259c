"""A job's workflow as a graph: its steps in order, coloured by the state of each step in
the job's last run, with the upstream jobs whose batches its steps consume."""

from __future__ import annotations

from lineage.graphs.model import Graph, GraphNode
from processes.models import ExecState, InstanceExec, Process
from processes.workflow import NextLinks, steps_in_order


def _duration(run: InstanceExec) -> str:
    if not run.end_ts:
        return "running" if run.exec_state_id == ExecState.RUNNING else ""
    seconds = (run.end_ts - run.start_ts).total_seconds()
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def workflow_graph(job: Process) -> Graph:
    """A job's steps in their workflow, coloured by the state of each step in the job's last
    run, with the upstream jobs whose batches its steps consume."""
    graph = Graph("process", f"Workflow of {job.name}")
    last = InstanceExec.objects.filter(process=job, parent__isnull=True).order_by("-id").first()
    step_runs: dict[int, InstanceExec] = {}
    skipped: set[int] = set()
    if last is not None:
        for attempt in InstanceExec.objects.filter(parent=last).order_by("id"):
            step_runs[attempt.process_id] = attempt  # the latest attempt of each step
        skipped = set(last.plan.get("skipped", []))
    steps = steps_in_order(job)
    for step in steps:
        run = step_runs.get(step.pk)
        if run is not None:
            state = ExecState(run.exec_state_id).name
            detail = " · ".join(filter(None, [step.process_type.job_kind, _duration(run)]))
        else:
            state = "SKIPPED" if step.pk in skipped else "NOT RUN"
            detail = step.process_type.job_kind
        graph.add(
            GraphNode(f"p{step.pk}", step.name, "step", detail, state, ref=step.pk, focus=False)
        )
    ids = [s.pk for s in steps]
    for src, dst in NextLinks.objects.filter(
        from_process_id__in=ids, to_process_id__in=ids
    ).values_list("from_process_id", "to_process_id"):
        graph.link(f"p{src}", f"p{dst}")
    upstream = Process.enqueuing_processes.through.objects.filter(
        from_process_id__in=ids, to_process__deleted=False
    ).values_list("from_process_id", "to_process_id", "to_process__name")
    for step_id, job_id, name in upstream:
        graph.add(GraphNode(f"p{job_id}", name, "job", "upstream job", ref=job_id))
        graph.link(f"p{job_id}", f"p{step_id}", "batches")
    return graph
