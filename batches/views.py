"""Pages of the queue and its archive (filters; requeue and discard after a confirmation),
of the batches (filters) and of a batch (its files, its provenance graph)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from batches import preview, queue, selectors
from batches.filters import ArchiveFilter, BatchFilter, QueueFilter
from batches.models import (
    Batch,
    BatchConsumpQueue,
    BatchStatus,
    HiveTable,
    Partition,
)
from batches.tasks import ask_preview
from bdre.access import Role, can, scope
from bdre.errors import BdreError
from bdre.ids import is_id
from bdre.sql_parse import struct_fields
from lineage import graphs
from processes import scan_gate, tasks
from processes.models import Process

ACTIONS = {
    "requeue": "Put the batch back in the queue: the next run of the job takes it again. If "
    "the run it failed in never succeeded, every failed row of that run comes back with it, "
    "and the run's batch is rebuilt, replacing what its failed attempts wrote.",
    "discard": "Take the batch out of the queue for good: no run will claim it.",
    "retry": "Put the batch back in the queue, as a requeue does, and start a run of the job "
    "now: its first steps go to the workers at once, and the run's page opens.",
}
BULK_ACTIONS = ("requeue", "discard")


@login_required
def queue_inspector(request: HttpRequest) -> HttpResponse:
    archived = request.GET.get("table") == "archive"
    rows = selectors.queue_rows(request.user, archived=archived)
    found = (ArchiveFilter if archived else QueueFilter)(request.GET, queryset=rows)
    page = Paginator(found.qs if found.is_valid() else rows.none(), 50).get_page(
        request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    page.object_list = list(page.object_list)
    if not archived:
        selectors.with_actions(request.user, page.object_list)
    return render(
        request,
        "batches/queue.html",
        {
            "archived": archived,
            "page": page,
            "errors": found.errors,
            "steps": selectors.steps(request.user),
            "states": BatchStatus.objects.order_by("pk"),
            "params": request.GET,
            "query": query.urlencode(),
            "can_act_on_any": any(getattr(row, "can_act", False) for row in page.object_list),
        },
    )


@login_required
def queue_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """GET: the confirmation page; POST: the action itself."""
    row = get_object_or_404(
        scope(request.user, BatchConsumpQueue.objects.all()).select_related(
            "process__parent", "batch_state"
        ),
        pk=pk,
    )
    if not can(request.user, row, Role.DEVELOPER):
        raise PermissionDenied("Requeue and discard need the developer role.")
    if request.method == "POST":
        try:
            if action == "retry":
                started = tasks.retry_row(row.pk)
                if isinstance(started, scan_gate.Quiet):
                    messages.info(request, f"No run started: {started.detail}.")
                    return redirect("ui-queue")
                messages.success(
                    request,
                    f"Batch {row.source_batch_id} is queued again and run "
                    f"{started.instance_exec_id} of {Process.objects.get(pk=started.job_id)} "
                    "started to "
                    "take it: its first steps are queued now for the workers.",
                )
                return redirect("ui-run", pk=started.instance_exec_id)
            if action == "requeue":
                queue.requeue(row.pk)
                messages.success(request, f"Batch {row.source_batch_id} is queued again.")
            else:
                queue.discard(
                    row.pk, request.POST.get("reason", ""), by=request.user.get_username()
                )
                messages.success(request, f"Batch {row.source_batch_id} is discarded.")
        except BdreError as exc:
            messages.error(request, f"{exc.message} (error {exc.code})")
        return redirect("ui-queue")
    return render(
        request,
        "batches/confirm.html",
        {"row": row, "action": action, "explanation": ACTIONS[action]},
    )


@login_required
@require_POST
def queue_bulk(request: HttpRequest) -> HttpResponse:
    """The rows ticked on the queue page, requeued or discarded together: a confirmation
    first (the rows listed), then each row through the same service, each in its own
    transaction, and a message per outcome."""
    action = request.POST.get("action", "")
    if action not in BULK_ACTIONS:  # a retry starts a run: one row at a time
        return redirect("ui-queue")
    ids = [int(v) for v in request.POST.getlist("ids") if v.isdigit() and len(v) < 19]
    allowed = selectors.acting_on(request.user, ids)
    chosen = list(
        BatchConsumpQueue.objects.filter(pk__in=allowed)
        .select_related("process__parent", "batch_state")
        .order_by("id")
    )
    if not chosen:
        if ids:
            raise Http404("No such queue row.")
        messages.error(request, "Tick the rows to act on first.")
        return redirect("ui-queue")
    if request.POST.get("confirm") != "yes":
        return render(
            request,
            "batches/confirm_many.html",
            {"rows": chosen, "action": action, "explanation": ACTIONS[action]},
        )
    pks = [row.pk for row in chosen]
    if action == "requeue":
        results = queue.requeue_many(pks)
    else:
        results = queue.discard_many(
            pks, request.POST.get("reason", ""), by=request.user.get_username()
        )
    done = [r.id for r in results if r.error is None]
    if done:
        verb = "queued again" if action == "requeue" else "discarded"
        messages.success(request, f"{len(done)} row{pluralize(len(done))} {verb}.")
    for r in results:
        if r.error is not None:
            messages.error(request, f"Row {r.id}: {r.error.message} (error {r.error.code})")
    return redirect("ui-queue")


@login_required
def batch_list(request: HttpRequest) -> HttpResponse:
    batches = selectors.batches(request.user)
    found = BatchFilter(request.GET, queryset=batches)
    page = Paginator(found.qs if found.is_valid() else batches.none(), 50).get_page(
        request.GET.get("page")
    )
    jobs = scope(request.user, Process.objects.live().jobs())
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "batches/list.html",
        {
            "page": page,
            "errors": found.errors,
            "jobs": jobs.order_by("name"),
            "params": request.GET,
            "query": query.urlencode(),
        },
    )


@login_required
def batch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    visible = scope(request.user, Batch.objects.all())
    batch = get_object_or_404(visible.select_related("source_instance_exec__process"), pk=pk)
    graph = graphs.provenance_graph(batch.pk, visible=visible)
    for node in graph.nodes.values():
        if node.kind == "batch" and node.ref:
            node.url = f"/batches/{node.ref}/"
    files = Paginator(selectors.batch_files(batch), 100).get_page(request.GET.get("page"))
    return render(
        request,
        "batches/batch.html",
        {
            "batch": batch,
            "files": files,
            "graph": mark_safe(graphs.to_svg(graph)),
            "can_reprocess": can(request.user, batch, Role.DEVELOPER),
            "written": selectors.batch_partitions(request.user, batch),
        },
    )


def _table(request: HttpRequest, pk: int) -> HiveTable:
    return get_object_or_404(
        selectors.tables(request.user).select_related("team", "bus_domain"), pk=pk
    )


def _chosen(request: HttpRequest, table: HiveTable, asked: str) -> Partition | None:
    """The partition asked for (any attempt of the team's own table, a published one of a
    shared table), else the newest published one."""
    if asked and not is_id(asked):
        raise Http404("no such partition")
    chosen = selectors.chosen_partition(request.user, table, int(asked) if asked else None)
    if asked and chosen is None:
        raise Http404("no such partition")
    return chosen


def _preview_context(table: HiveTable, chosen: Partition | None) -> dict[str, object]:
    shown = preview.latest(chosen) if chosen is not None else None
    refused = preview.refusal(chosen) if chosen is not None else None
    given_up = shown is not None and preview.given_up(shown)
    return {
        "table": table,
        "chosen": chosen,
        "preview": shown,
        "unreadable": refused.message if refused else "",
        "given_up": preview.given_up_message(shown) if shown is not None and given_up else "",
        "waiting": shown is not None and shown.state in preview.WAITING and not given_up,
        "preview_rows": preview.DEFAULT_ROWS,
        "preview_seconds": settings.BDRE_PREVIEW_SECONDS,
        "spark_queue": settings.BDRE_SPARK_QUEUE,
    }


@login_required
def table_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A registered table: its columns and types, its partitions, the published ones
    (what readers see, one a batch) or every attempt (``?attempts=all``), and the first rows
    of one of them as a Spark worker read them."""
    table = _table(request, pk)
    # Another team's table, shared: what its readers see, not the owner's attempts and runs.
    own = can(request.user, table, Role.VIEWER)
    every_attempt = own and request.GET.get("attempts") == "all"
    rows = selectors.table_partitions(table, every_attempt=every_attempt)
    partitions = Paginator(rows, 50).get_page(request.GET.get("page"))
    chosen = _chosen(request, table, request.GET.get("preview", ""))
    return render(
        request,
        "batches/table.html",
        {
            "columns": struct_fields(table.ddl),
            "partitions": partitions,
            "every_attempt": every_attempt,
            "own": own,
            "published": selectors.table_partitions(table).count(),
            **_preview_context(table, chosen),
        },
    )


@login_required
@require_POST
def table_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask a Spark worker for the first rows of a partition; back to the table's page,
    which shows them once read."""
    table = _table(request, pk)
    chosen = _chosen(request, table, request.POST.get("partition", ""))
    if chosen is None:
        raise Http404("no partition of this table is published yet")
    try:
        ask_preview(chosen, preview.DEFAULT_ROWS, request.user)
    except BdreError as exc:
        messages.error(request, exc.message)
    return redirect(f"{reverse('ui-table', args=[table.pk])}?preview={chosen.pk}#rows")


@login_required
def table_preview_live(request: HttpRequest, pk: int, partition: int) -> HttpResponse:
    """The preview's part of the table's page, fetched by its script until it is read."""
    table = _table(request, pk)
    chosen = _chosen(request, table, str(partition))
    return render(request, "batches/_preview.html", _preview_context(table, chosen))
