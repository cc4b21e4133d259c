"""What the graph tests read off a graph, a graph with every character to escape, and
generated graphs that are hard to draw (long names, crowded labels, over 100 nodes)."""

from __future__ import annotations

import random

from lineage import graphs


def labels(graph) -> set[str]:
    return {n.label for n in graph.nodes.values()}


def edge_names(graph, *, indirect: bool | None = None) -> set[tuple[str, str, str]]:
    """(source, target, label) of the graph's edges; only the indirect ones (dashed: a
    filter, a join, a group-by) or only the others, when ``indirect`` says."""
    name = {
        i: f"{n.detail}.{n.label}" if n.kind == "column" else n.label
        for i, n in graph.nodes.items()
    }
    return {
        (name[e.source], name[e.target], e.label)
        for e in graph.edges
        if indirect is None or e.indirect == indirect
    }


def odd_graph() -> graphs.Graph:
    graph = graphs.Graph("table", 'Lineage of "a<b>" & c')
    graph.add(graphs.GraphNode("x", 'tbl "x" <&>', "table", url="/ui/tables/1?a=1&b=2"))
    graph.add(graphs.GraphNode("y", "y", "column", "default.t", focus=True))
    graph.link("x", "y", 'CAST, "odd"')
    return graph


FUNCTIONS = ("CAST", "UPPER", "COALESCE", "SUM", "CONCAT_WS", "DATE_TRUNC", "REGEXP_REPLACE")


def long_names_graph() -> graphs.Graph:
    """Names far longer than a box, a title longer than the graph, long edge labels."""
    graph = graphs.Graph(
        "table",
        "Table lineage of warehouse_reporting."
        + "customer_lifetime_value_by_region_and_marketing_channel_daily_snapshot" * 3,
    )
    names = [
        "raw_landing_zone.customer_orders_with_line_items_and_shipping_addresses_v2",
        "staging.customer_orders_cleaned",
        "warehouse_reporting.customer_lifetime_value_by_region_and_marketing_channel",
        "x",
        "ÉÀ.日本語のテーブル名はとても長いのでボックスに入りきらないかもしれません",
    ]
    for i, name in enumerate(names):
        graph.add(graphs.GraphNode(f"n{i}", name, "table", detail="d" * (i * 20), focus=i == 2))
    graph.link("n0", "n1", "CAST, COALESCE, REGEXP_REPLACE, DATE_TRUNC, CONCAT_WS, UPPER, SUM")
    graph.link("n1", "n2", "SUM, CAST")
    graph.link("n3", "n2", "UPPER")
    graph.link("n2", "n4", "DATE_TRUNC")
    graph.link("n4", "n4", "a loop")
    return graph


def crowded_graph(left: int = 8, right: int = 8) -> graphs.Graph:
    """Three labelled edges out of every node of one layer into the next: more labels than
    the gap between the two layers can hold."""
    rnd = random.Random(1)
    graph = graphs.Graph("column", "Many labelled edges between two layers")
    for i in range(left):
        graph.add(graphs.GraphNode(f"a{i}", f"src_col_{i}", "column", "staging.orders"))
    for i in range(right):
        graph.add(graphs.GraphNode(f"b{i}", f"dst_col_{i}", "column", "mart.orders"))
    for i in range(left):
        for j in rnd.sample(range(right), 3):
            graph.link(f"a{i}", f"b{j}", ", ".join(rnd.sample(FUNCTIONS, 2)))
    return graph


def column_lineage_graph(nodes: int = 120, layers: int = 6, seed: int = 7) -> graphs.Graph:
    """Columns of ``layers`` tables, each fed by one to three columns of the table before,
    through zero to two functions, some with long names."""
    rnd = random.Random(seed)
    graph = graphs.Graph("column", "Column lineage of analytics.activity_by_day.total_revenue")
    per = nodes // layers
    ids = [[f"c{layer}_{k}" for k in range(per)] for layer in range(layers)]
    for layer, row in enumerate(ids):
        for k, node_id in enumerate(row):
            long = "_with_a_rather_long_name" if k % 7 == 0 else ""
            graph.add(
                graphs.GraphNode(
                    node_id, f"column_{layer}_{k}{long}", "column", f"db{layer}.t{k % 4}"
                )
            )
    for layer in range(1, layers):
        for node_id in ids[layer]:
            for source in rnd.sample(ids[layer - 1], rnd.choice([1, 1, 2, 3])):
                graph.link(source, node_id, ", ".join(rnd.sample(FUNCTIONS, rnd.choice([0, 1, 2]))))
    return graph


def provenance_like_graph(batches: int = 70, seed: int = 3) -> graphs.Graph:
    """Batches made from files and from earlier batches by labelled steps, as
    ``provenance_graph`` draws them: over 100 nodes."""
    rnd = random.Random(seed)
    graph = graphs.Graph("batch", "Provenance of batch 1000")
    for b in range(batches):
        state = rnd.choice(["SUCCESS", "FAILED", ""])
        graph.add(graphs.GraphNode(f"b{b}", f"batch {1000 + b}", "batch", f"job_{b % 9}", state))
    for b in range(batches // 3):
        for f in range(2):
            graph.add(graphs.GraphNode(f"f{b}_{f}", f"in_{b}_{f}.tsv", "file", f"/landing/{b}"))
            graph.link(f"f{b}_{f}", f"b{b}")
    for b in range(1, batches):
        for source in rnd.sample(range(max(0, b - 12), b), min(b, rnd.choice([1, 2]))):
            graph.link(f"b{source}", f"b{b}", f"step_{source % 5}_consume")
    return graph
