"""The pages of operations (``processes.operations``): every backfill, rewind, reprocess and
catch-up of the user's teams, each with its progress batch by batch, refreshing while it
goes; and the catch-up's page, which shows its plan before it queues anything."""

from __future__ import annotations

from datetime import date, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from bdre.access import Role, can, scope
from bdre.errors import BdreError
from processes import operations, tasks
from processes.models import Operation, Process

NAME_LENGTH = 200


@login_required
def operation_list(request: HttpRequest) -> HttpResponse:
    visible = scope(request.user, Operation.objects.select_related("bus_domain", "created_by"))
    page = Paginator(visible, 25).get_page(request.GET.get("page"))
    rows = [operations.progress(o) for o in page.object_list]
    return render(request, "processes/operations.html", {"page": page, "rows": rows})


def _context(request: HttpRequest, pk: int) -> dict[str, object]:
    visible = scope(request.user, Operation.objects.select_related("bus_domain", "created_by"))
    operation = get_object_or_404(visible, pk=pk)
    return {"progress": operations.progress(operation), "operation": operation}


@login_required
def operation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "processes/operation.html", _context(request, pk))


@login_required
def operation_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The changing part of the operation's page, fetched by its script until it is done."""
    return render(request, "processes/_operation_live.html", _context(request, pk))


def _day(raw: str | None) -> date | None:
    try:
        return date.fromisoformat(raw) if raw else None
    except ValueError:
        return None


@login_required
def catch_up(request: HttpRequest, pk: int) -> HttpResponse:
    """A job's catch-up from a day on: the batches its upstream jobs delivered that it has
    not consumed, previewed; queued and a run started on a second click."""
    job = get_object_or_404(scope(request.user, Process.objects.live().jobs()), pk=pk)
    if not can(request.user, job, Role.DEVELOPER):
        raise PermissionDenied("A catch-up needs the developer role.")
    data = request.POST if request.method == "POST" else request.GET
    since = _day(data.get("since"))
    name = data.get("name", "")[:NAME_LENGTH]
    planned, error = None, ""
    if since is not None:
        try:
            planned = operations.plan_catch_up(job.pk, since)
        except BdreError as exc:
            error = f"{exc.message} (error {exc.code})"
    if request.method == "POST" and planned is not None and since is not None:
        try:
            done = tasks.start_catch_up(job.pk, since, name=name, by=request.user)
        except BdreError as exc:
            messages.error(request, f"{exc.message} (error {exc.code})")
            return redirect(request.get_full_path())
        text = f"{done.operation.name}: {len(done.queued)} batches queued"
        if done.run:
            messages.success(request, f"{text}; run {done.run} started.")
        else:
            messages.success(request, f"{text}; {done.why_not}.")
        return redirect("ui-operation", done.operation.pk)
    return render(
        request,
        "processes/catch_up.html",
        {
            "job": job,
            "plan": planned,
            "error": error,
            "since": since or timezone.localdate() - timedelta(days=7),
            "asked": since is not None,
            "invalid": bool(data.get("since")) and since is None,
            "name": name,
            "back": reverse("ui-job", args=[job.pk]),
        },
    )
