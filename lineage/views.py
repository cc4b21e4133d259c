"""Lineage pages: search tables and columns; a node's table-level or column-level graph with
the processes whose queries wrote it. What they show goes through ``lineage.visibility``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from batches import catalog, tables
from batches.models import HiveTable
from bdre import charts
from bdre.ids import is_id
from lineage import graphs, quality, visibility


@login_required
def search(request: HttpRequest) -> HttpResponse:
    """Tables whose name holds the text, then columns whose own name does (not every column of
    a table whose name does), within one table on request (``?table=``)."""
    # NUL cannot go into a PostgreSQL string; nothing could match it anyway
    text = request.GET.get("q", "").replace("\x00", "").strip()[:200]
    nodes = visibility.nodes(request.user)
    tables = nodes.filter(container_node__isnull=True)
    columns = nodes.filter(container_node__isnull=False)
    within = None
    asked = request.GET.get("table", "")
    if asked:
        if not is_id(asked):
            raise Http404("no such table")
        within = get_object_or_404(tables, pk=asked)
        columns = columns.filter(container_node=within)
    if text:
        tables = tables.filter(qualified_name__icontains=text)
        columns = columns.filter(display_name__icontains=text)
    shown = bool(text or within)
    return render(
        request,
        "lineage/search.html",
        {
            "q": text,
            "within": within,
            "tables": tables.order_by("qualified_name")[:SHOWN] if not within else [],
            "table_count": tables.count() if not within else 0,
            "columns": columns.order_by(
                "container_node__qualified_name", "node_order", "display_name"
            )[:SHOWN]
            if shown
            else [],
            "column_count": columns.count() if shown else 0,
            "shown": SHOWN,
        },
    )


SHOWN = 100  # of each list; the counts say how many matched


@login_required
def node(request: HttpRequest, pk: int) -> HttpResponse:
    user = request.user
    nodes = visibility.nodes(user)
    found = get_object_or_404(nodes.select_related("container_node"), pk=pk)
    table = (
        get_object_or_404(nodes, pk=found.container_node_id) if found.container_node_id else found
    )
    relations = visibility.relations(user)
    level = request.GET.get("level", "column" if found.container_node_id else "table")
    if level == "table":
        graph = graphs.table_graph(table, relations, nodes=nodes)
    else:
        level = "column"
        graph = graphs.column_graph(found, relations, nodes=nodes)
    for item in graph.nodes.values():
        if item.ref:
            item.url = f"/lineage/nodes/{item.ref}/?level={level}"
    registered = _registered(table.team_id, table.qualified_name)
    writers = (
        visibility.queries(user)
        .filter(relations__in=relations.filter(target_node=table))
        # A query keeps its step's run; the page links the job's run, which shows that step.
        .select_related("process__parent", "instance_exec")
        .order_by("-id")
        .distinct()[:20]
    )
    return render(
        request,
        "lineage/node.html",
        {
            # Where a user's own SparkSession finds it (docs/operations.md, "The catalog"),
            # and its page (columns, partitions).
            "catalog_name": catalog.catalog_name(registered) if registered else "",
            "registered": registered,
            "node": found,
            "table": table,
            "level": level,
            "graph": mark_safe(graphs.to_svg(graph)),
            "writers": writers,
            "columns": visibility.columns(user, table),
            "checks": [
                (history, mark_safe(_chart(history)))
                for history in quality.table_checks(table.team_id, table.qualified_name)
            ],
        },
    )


def _chart(history: quality.RuleHistory) -> str:
    return charts.stacked_bars(
        f"{history.rule}: rows passed and failed per batch",
        history.batches,
        [("passed", "#3a9a5b", history.passed), ("failed", "#c8404d", history.failed)],
    )


def _registered(team_id: int | None, qualified_name: str) -> HiveTable | None:
    """The registered table of its team a lineage node stands for, if any."""
    if team_id is None:
        return None
    database, table = tables.split_name(qualified_name)
    return (
        tables.own_tables(team_id)
        .filter(dbname__iexact=database, table_name__iexact=table)
        .order_by("pk")
        .first()
    )
