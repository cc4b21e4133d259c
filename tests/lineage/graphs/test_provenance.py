"""A batch's provenance graph: its files and the batches made from it."""

from __future__ import annotations

import pytest

from batches.models import BatchState
from lineage import graphs
from tests.helpers.factories import (
    BatchFactory,
    FileFactory,
    InstanceExecFactory,
    QueueRowFactory,
    StepFactory,
)
from tests.helpers.graphs import edge_names, labels

pytestmark = pytest.mark.django_db


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
