"""Pages of the queue and its archive (filters; requeue and discard after a confirmation),
of the batches (filters) and of a batch (its files, its provenance graph)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from batches import queue
from batches.filters import ArchiveFilter, BatchFilter, QueueFilter
from batches.models import (
    CLAIMABLE_STATES,
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    BatchStatus,
    File,
)
from bdre.access import Role, can, scope
from bdre.errors import BdreError
from lineage import graphs
from processes.models import Process

ACTIONS = {
    "requeue": "Put the batch back in the queue: the next run of the job takes it again. If "
    "the run it failed in never succeeded, every failed row of that run comes back with it, "
    "and the run's batch is rebuilt, replacing what its failed attempts wrote.",
    "discard": "Take the batch out of the queue for good: no run will claim it.",
}


@login_required
def queue_inspector(request: HttpRequest) -> HttpResponse:
    archived = request.GET.get("table") == "archive"
    model, filterset_class = (
        (ArchiveConsumpQueue, ArchiveFilter) if archived else (BatchConsumpQueue, QueueFilter)
    )
    rows = scope(request.user, model.objects.all()).select_related(
        "process__parent", "batch_state", "source_process"
    )
    found = filterset_class(request.GET, queryset=rows.order_by("-id"))
    page = Paginator(found.qs if found.is_valid() else rows.none(), 50).get_page(
        request.GET.get("page")
    )
    steps = scope(request.user, Process.objects.filter(parent__isnull=False, deleted=False))
    query = request.GET.copy()
    query.pop("page", None)
    page.object_list = list(page.object_list)
    if not archived:
        # one query for the page: the rows whose team gives the user the developer role
        ids = [row.pk for row in page.object_list]
        allowed = set(
            scope(request.user, model.objects.filter(pk__in=ids), Role.DEVELOPER).values_list(
                "pk", flat=True
            )
        )
        history = queue.attempt_history(page.object_list)
        for row in page.object_list:
            row.can_act = row.pk in allowed
            row.history = history[row.pk]
    return render(
        request,
        "batches/queue.html",
        {
            "archived": archived,
            "page": page,
            "errors": found.errors,
            "steps": steps.select_related("parent").order_by("parent__name", "name"),
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
    if action not in ACTIONS:
        return redirect("ui-queue")
    ids = [int(v) for v in request.POST.getlist("ids") if v.isdigit() and len(v) < 19]
    rows = BatchConsumpQueue.objects.filter(pk__in=ids)
    allowed = scope(request.user, rows, Role.DEVELOPER)
    if scope(request.user, rows).exclude(pk__in=allowed.values("pk")).exists():
        raise PermissionDenied("Requeue and discard need the developer role.")
    chosen = list(allowed.select_related("process__parent", "batch_state").order_by("id"))
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


def _with_contents(user, batches: QuerySet[Batch]) -> QuerySet[Batch]:
    """Each batch's run and job, its files (count and bytes) and the steps of the user's
    teams still waiting to claim it (another team's step may consume the batch: its rows are
    not the user's to count); subqueries, since two joined counts would multiply each other."""
    files = File.objects.filter(batch=OuterRef("pk")).values("batch")
    waiting = (
        scope(
            user,
            BatchConsumpQueue.objects.filter(
                source_batch=OuterRef("pk"), batch_state_id__in=CLAIMABLE_STATES
            ),
        )
        .values("source_batch")
        .annotate(n=Count("id"))
        .values("n")
    )
    return (
        batches.select_related("source_instance_exec__process")
        .annotate(
            file_count=Coalesce(Subquery(files.annotate(n=Count("id")).values("n")), 0),
            file_bytes=Subquery(files.annotate(n=Sum("file_size")).values("n")),
            waiting=Coalesce(Subquery(waiting), 0),
        )
        .order_by("-id")
    )


@login_required
def batch_list(request: HttpRequest) -> HttpResponse:
    batches = _with_contents(request.user, scope(request.user, Batch.objects.all()))
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
    files = Paginator(File.objects.filter(batch=batch).order_by("id"), 100).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "batches/batch.html",
        {
            "batch": batch,
            "files": files,
            "graph": mark_safe(graphs.to_svg(graph)),
            "can_reprocess": can(request.user, batch, Role.DEVELOPER),
        },
    )
