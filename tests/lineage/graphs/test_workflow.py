"""A job's workflow graph, coloured by its last run."""

from __future__ import annotations

import pytest

from lineage import graphs
from processes.models import ExecState
from tests.helpers.factories import InstanceExecFactory, JobFactory, StepFactory
from tests.helpers.graphs import edge_names

pytestmark = pytest.mark.django_db


def test_the_workflow_graph_colours_each_step_by_the_last_run():
    job = JobFactory()
    load, clean, report = (StepFactory(parent=job, name=n) for n in ("load", "clean", "report"))
    job.next_processes.add(load)
    load.next_processes.add(clean)
    clean.next_processes.add(report)
    upstream = JobFactory(name="ingest", bus_domain=job.bus_domain)
    load.enqueuing_processes.add(upstream)
    older = InstanceExecFactory(process=job, exec_state_id=ExecState.SUCCESS)
    InstanceExecFactory(process=report, parent=older, exec_state_id=ExecState.SUCCESS)
    last = InstanceExecFactory(process=job, exec_state_id=ExecState.FAILED)
    InstanceExecFactory(process=load, parent=last, exec_state_id=ExecState.SUCCESS)
    InstanceExecFactory(process=clean, parent=last, exec_state_id=ExecState.FAILED)

    graph = graphs.workflow_graph(job)

    states = {n.label: n.state for n in graph.nodes.values()}
    assert states == {"load": "SUCCESS", "clean": "FAILED", "report": "NOT RUN", "ingest": ""}
    assert edge_names(graph) == {
        ("load", "clean", ""),
        ("clean", "report", ""),
        ("ingest", "load", "batches"),
    }
    svg = graphs.to_svg(graph)
    assert 'data-state="FAILED"' in svg and "#fbd9dc" in svg  # the failed step is red
