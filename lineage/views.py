"""Lineage pages: search tables and columns; a node's table-level or column-level graph with
the processes whose queries wrote it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from bdre.access import scope
from lineage import graph as graphs
from lineage.models import LineageNode, LineageQuery, LineageRelation


@login_required
def search(request: HttpRequest) -> HttpResponse:
    # NUL cannot go into a PostgreSQL string; nothing could match it anyway
    text = request.GET.get("q", "").replace("\x00", "").strip()[:200]
    nodes = scope(request.user, LineageNode.objects.all())
    if text:
        nodes = nodes.filter(qualified_name__icontains=text)
    tables = nodes.filter(container_node__isnull=True).order_by("qualified_name")[:100]
    columns = (
        nodes.filter(container_node__isnull=False).order_by("qualified_name")[:100] if text else []
    )
    return render(request, "lineage/search.html", {"q": text, "tables": tables, "columns": columns})


@login_required
def node(request: HttpRequest, pk: int) -> HttpResponse:
    found = get_object_or_404(
        scope(request.user, LineageNode.objects.all()).select_related("container_node"), pk=pk
    )
    relations = scope(request.user, LineageRelation.objects.all())
    level = request.GET.get("level", "column" if found.container_node_id else "table")
    if level == "table":
        table = found.container_node or found
        graph = graphs.table_graph(table, relations)
    else:
        level = "column"
        graph = graphs.column_graph(found, relations)
    for item in graph.nodes.values():
        if item.ref:
            item.url = f"/lineage/nodes/{item.ref}/?level={level}"
    table = found.container_node or found
    writers = (
        scope(request.user, LineageQuery.objects.all())
        .filter(relations__target_node=table)
        .select_related("process__parent")
        .order_by("-id")
        .distinct()[:20]
    )
    return render(
        request,
        "lineage/node.html",
        {
            "node": found,
            "table": table,
            "level": level,
            "graph": mark_safe(graphs.to_svg(graph)),
            "writers": writers,
            "columns": table.children.order_by("node_order", "id"),
        },
    )
