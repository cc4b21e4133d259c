"""Graphs of lineage, workflows and provenance, and their SVG and DOT drawings."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from batches.models import BatchState
from lineage import graph as graphs
from lineage.extract import extract, record
from lineage.models import LineageNode, LineageRelation
from processes.models import ExecState
from tests.factories import (
    BatchFactory,
    FileFactory,
    InstanceExecFactory,
    JobFactory,
    LineageQueryFactory,
    QueueRowFactory,
    StepFactory,
)

SCHEMA = {
    "lake": {
        "orders": {"id": "int", "customer_id": "int", "amount": "double"},
        "customers": {"id": "int", "country": "string"},
        "daily": {"country": "string", "total": "double"},
    }
}
SVG = "{http://www.w3.org/2000/svg}"

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain():
    """lake.orders + lake.customers -> lake.daily -> lake.report, by two queries."""
    first = LineageQueryFactory()
    record(
        first,
        extract(
            """SELECT c.country, SUM(o.amount) AS total FROM lake.orders o
               JOIN lake.customers c ON o.customer_id = c.id GROUP BY c.country""",
            schema=SCHEMA,
            target="lake.daily",
        ),
    )
    second = LineageQueryFactory(process=first.process)
    record(
        second,
        extract(
            "SELECT UPPER(country) AS country, ROUND(total, 2) AS total FROM lake.daily",
            schema=SCHEMA,
            target="lake.report",
        ),
    )
    return {n.qualified_name: n for n in LineageNode.objects.all()}


def labels(graph) -> set[str]:
    return {n.label for n in graph.nodes.values()}


def edge_names(graph) -> set[tuple[str, str, str]]:
    name = {
        i: f"{n.detail}.{n.label}" if n.kind == "column" else n.label
        for i, n in graph.nodes.items()
    }
    return {(name[e.source], name[e.target], e.label) for e in graph.edges}


def test_the_table_graph_reaches_tables_upstream_and_downstream(chain):
    graph = graphs.table_graph(chain["lake.daily"], LineageRelation.objects.all())
    assert labels(graph) == {"lake.orders", "lake.customers", "lake.daily", "lake.report"}
    assert edge_names(graph) == {
        ("lake.orders", "lake.daily", ""),
        ("lake.customers", "lake.daily", ""),
        ("lake.daily", "lake.report", ""),
    }
    assert [n.label for n in graph.nodes.values() if n.focus] == ["lake.daily"]


def test_a_column_graph_follows_the_column_through_its_functions(chain):
    graph = graphs.column_graph(chain["lake.report.total"], LineageRelation.objects.all())
    assert edge_names(graph) == {
        ("lake.orders.amount", "lake.daily.total", "SUM"),
        ("lake.daily.total", "lake.report.total", "ROUND"),
    }


def test_a_table_column_graph_shows_its_columns_with_their_direct_neighbours(chain):
    graph = graphs.column_graph(chain["lake.daily"], LineageRelation.objects.all())
    assert edge_names(graph) == {
        ("lake.customers.country", "lake.daily.country", ""),
        ("lake.orders.amount", "lake.daily.total", "SUM"),
        ("lake.daily.country", "lake.report.country", "UPPER"),
        ("lake.daily.total", "lake.report.total", "ROUND"),
    }
    assert {n.label for n in graph.nodes.values() if n.focus} == {"country", "total"}


def test_downstream_impact_lists_every_column_a_column_flows_into_nearest_first(chain):
    found = graphs.impact(
        chain["lake.orders.amount"], LineageRelation.objects.all(), upstream=False
    )
    assert [(i.qualified_name, i.distance, i.functions) for i in found] == [
        ("lake.daily.total", 1, ["SUM"]),
        ("lake.report.total", 2, ["ROUND"]),
    ]


def test_upstream_impact_of_a_column_reaches_the_source_columns(chain):
    found = graphs.impact(
        chain["lake.report.country"], LineageRelation.objects.all(), upstream=True
    )
    assert [(i.qualified_name, i.distance) for i in found] == [
        ("lake.daily.country", 1),
        ("lake.customers.country", 2),
    ]


def test_relations_out_of_scope_are_not_followed(chain):
    graph = graphs.table_graph(chain["lake.daily"], LineageRelation.objects.none())
    assert labels(graph) == {"lake.daily"}
    assert graph.edges == []


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


def test_the_provenance_graph_runs_from_the_files_to_the_batches_made_from_them():
    step = StepFactory()
    landed = BatchFactory(bus_domain=step.bus_domain)
    files = [FileFactory(batch=landed, path=f"/landing/2026/11/part-{i}.tsv") for i in range(2)]
    run = InstanceExecFactory(process=step.parent)
    produced = BatchFactory(bus_domain=step.bus_domain, source_instance_exec=run)
    QueueRowFactory(
        process=step,
        source_batch=landed,
        target_batch=produced,
        batch_state_id=BatchState.PROCESSED,
    )
    graph = graphs.provenance_graph(produced.pk)
    assert edge_names(graph) == {
        ("part-0.tsv", f"batch {landed.pk}", ""),
        ("part-1.tsv", f"batch {landed.pk}", ""),
        (f"batch {landed.pk}", f"batch {produced.pk}", step.name),
    }
    assert graph.nodes[f"b{produced.pk}"].detail == step.parent.name
    assert graph.nodes[f"f{files[0].pk}"].detail == "/landing/2026/11/part-0.tsv"

    hidden = graphs.provenance_graph(
        produced.pk, visible=type(landed).objects.exclude(pk=landed.pk)
    )
    assert labels(hidden) == {f"batch {produced.pk}"}


def test_a_batch_with_many_files_shows_some_and_counts_the_rest():
    batch = BatchFactory()
    for _ in range(graphs.FILES_PER_BATCH + 5):
        FileFactory(batch=batch)
    graph = graphs.provenance_graph(batch.pk)
    assert sum(n.kind == "file" for n in graph.nodes.values()) == graphs.FILES_PER_BATCH
    assert "5 more files" in labels(graph)


def odd_graph() -> graphs.Graph:
    graph = graphs.Graph("table", 'Lineage of "a<b>" & c')
    graph.add(graphs.GraphNode("x", 'tbl "x" <&>', "table", url="/ui/tables/1?a=1&b=2"))
    graph.add(graphs.GraphNode("y", "y", "column", "default.t", focus=True))
    graph.link("x", "y", 'CAST, "odd"')
    return graph


def test_the_svg_is_well_formed_xml_with_escaped_labels_and_links():
    root = ET.fromstring(graphs.to_svg(odd_graph()))
    assert root.tag == f"{SVG}svg"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert 'tbl "x" <&>' in texts and 'CAST, "odd"' in texts
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == ["/ui/tables/1?a=1&b=2"]
    assert len(list(root.iter(f"{SVG}path"))) == 2  # the arrowhead and the one edge


def test_the_dot_escapes_quotes_and_keeps_labels():
    dot = graphs.to_dot(odd_graph())
    assert dot.startswith('digraph "Lineage of \\"a<b>\\" & c" {')
    assert '"x" -> "y" [label="CAST, \\"odd\\""];' in dot
    assert re.search(r'"y" \[label="y\\ndefault.t", .*penwidth=2.5\];', dot)


def test_a_huge_graph_is_cut_and_says_so():
    graph = graphs.Graph("table", "big")
    for i in range(graphs.MAX_NODES + 10):
        graph.add(graphs.GraphNode(f"n{i}", f"t{i}", "table"))
    assert len(graph.nodes) == graphs.MAX_NODES and graph.truncated
    assert "cut at" in graphs.to_svg(graph)
