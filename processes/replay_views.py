"""The pages of backfill, rewind and reprocess (``processes.replay``) and of a scan's marker
moved back (``batches.ingest.markers``): each shows its plan (which batches are built again,
from which input, which partitions are replaced; where the marker goes and what is listed
again) before anything runs, and starts it only on a second, explicit click."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from batches.ingest import markers
from batches.models import Batch, File
from bdre.access import Role, can, scope
from bdre.errors import BdreError
from processes import replay, tasks
from processes.models import Process

NAME_LENGTH = 200  # an operation's name (processes.models.Operation.name)


def _page(
    request: HttpRequest,
    obj: models.Model,
    title: str,
    plan: Callable[[], replay.ReplayPlan] | None,
    params: dict[str, object],
    back: str,
) -> HttpResponse:
    if not can(request.user, obj, Role.DEVELOPER):
        raise PermissionDenied("Backfill, rewind and reprocess need the developer role.")
    planned, error = None, ""
    if plan is not None:
        try:
            planned = plan()
        except BdreError as exc:
            error = f"{exc.message} (error {exc.code})"
    if request.method == "POST" and planned is not None:
        kept = ("asked", "invalid", "catch_up")
        asked = {k: str(v) for k, v in params.items() if k not in kept and v}
        try:
            started = tasks.start_replay(
                planned,
                asked=asked or {"batches": planned.first},
                name=request.POST.get("name", "")[:NAME_LENGTH],
                by=request.user,
            )
        except BdreError as exc:
            messages.error(request, f"{exc.message} (error {exc.code})")
            return redirect(request.get_full_path())
        batches = ", ".join(str(b) for b in planned.first)
        text = f"{title}: batch{'es' if len(planned.first) > 1 else ''} {batches} put back"
        if started.runs:
            messages.success(request, f"{text}; run {started.runs[0]} started.")
        elif started.paused:
            messages.success(request, f"{text}; the job is paused: it rebuilds them once resumed.")
        else:
            messages.success(request, f"{text}; the job's next run rebuilds first.")
        # Its progress, batch by batch, with a link to each run as it starts.
        return redirect("ui-operation", started.operation.pk)
    return render(
        request,
        "processes/replay.html",
        {
            "title": title,
            "plan": planned,
            "error": error,
            "params": params,
            "back": back,
            "name_length": NAME_LENGTH,
            "catch_up": params.get("catch_up") if error else None,
        },
    )


def _visible(request: HttpRequest, model: type[models.Model], pk: int) -> models.Model:
    return get_object_or_404(scope(request.user, model._default_manager.all()), pk=pk)


def _date(raw: str | None) -> date | None:
    try:
        return date.fromisoformat(raw) if raw else None
    except ValueError:
        return None


@login_required
def backfill(request: HttpRequest, pk: int) -> HttpResponse:
    job = _visible(request, Process, pk)
    data = request.POST if request.method == "POST" else request.GET
    today = timezone.localdate()
    since, until = _date(data.get("since")), _date(data.get("until"))
    label = data.get("label_of_input", "").strip()[:64]
    asked = since is not None and until is not None
    params: dict[str, object] = {
        "since": since or today - timedelta(days=7),
        "until": until or today,
        "label_of_input": label,
        "asked": asked,
        "invalid": bool(data.get("since") or data.get("until")) and not asked,
    }
    plan = None
    if since is not None and until is not None:
        first, last = since, until
        plan = lambda: replay.plan_backfill(job.pk, first, last, label=label)  # noqa: E731
    return _page(request, job, f"Backfill {job}", plan, params, reverse("ui-job", args=[job.pk]))


@login_required
def rewind(request: HttpRequest, pk: int) -> HttpResponse:
    step = _visible(request, Process, pk)
    data = request.POST if request.method == "POST" else request.GET
    raw, day = data.get("batch", ""), _date(data.get("from_day"))
    batch = int(raw) if raw.isdigit() else None
    params: dict[str, object] = {
        "batch": raw,
        "from_day": day or "",
        "asked": batch is not None or day is not None,
        "invalid": (bool(raw) and batch is None) or (bool(data.get("from_day")) and day is None),
    }
    plan = None
    if batch is not None or day is not None:
        first = batch
        plan = lambda: replay.plan_rewind(step.pk, first, since=day)  # noqa: E731
    assert isinstance(step, Process)
    back = reverse("ui-job", args=[step.parent_id or step.pk])
    if step.parent_id is not None:
        # A step that never consumed what it is asked to consume again: its job catches up.
        params["catch_up"] = reverse("ui-job-catch-up", args=[step.parent_id])
    return _page(request, step, f"Rewind {step}", plan, params, back)


@login_required
def reprocess_batch(request: HttpRequest, pk: int) -> HttpResponse:
    batch = _visible(request, Batch, pk)
    return _page(
        request,
        batch,
        f"Reprocess batch {batch.pk}",
        lambda: replay.plan_reprocess_batch(batch.pk),
        {},
        reverse("ui-batch", args=[batch.pk]),
    )


@login_required
def reprocess_file(request: HttpRequest, pk: int) -> HttpResponse:
    file = _visible(request, File, pk)
    assert isinstance(file, File)
    return _page(
        request,
        file,
        f"Reprocess {file.path.rsplit('/', 1)[-1]}",
        lambda: replay.plan_reprocess_file(file.pk),
        {"path": file.path},
        reverse("ui-batch", args=[file.batch_id]),
    )


class MarkerForm(forms.Form):
    key = forms.CharField(required=False, max_length=markers.KEY_LENGTH, strip=False)
    since = forms.DateTimeField(required=False)

    def clean(self) -> dict:
        data = super().clean() or {}
        if bool(data.get("key")) == bool(data.get("since")):
            raise forms.ValidationError(
                "Give a key or a time (not both), the time as 2026-11-27T10:00."
            )
        return data


@login_required
def reset_marker(request: HttpRequest, pk: int) -> HttpResponse:
    """A scan step's marker moved back to a key, or to just before the first file
    registered since a time: the plan first, then a second click moves it."""
    step = _visible(request, Process, pk)
    assert isinstance(step, Process)
    if step.parent_id is None:
        raise Http404("Only a scan step has a marker.")
    if not can(request.user, step, Role.DEVELOPER):
        raise PermissionDenied("Moving a scan's marker needs the developer role.")
    data = request.POST if request.method == "POST" else request.GET
    form = MarkerForm(data if ("key" in data or "since" in data) else None)
    back = reverse("ui-job", args=[step.parent_id])
    planned, error = None, ""
    if form.is_bound and form.is_valid():
        key, since = form.cleaned_data.get("key") or None, form.cleaned_data.get("since")
        try:
            call = markers.reset if request.method == "POST" else markers.plan_reset
            planned = call(step.pk, key=key, since=since)
        except markers.MarkerRefused as exc:
            error = str(exc)
        except BdreError as exc:
            error = f"{exc.message} (error {exc.code})"
        if request.method == "POST" and planned is not None:
            messages.success(
                request,
                f"The marker of {step.name} is moved back to {planned.new_marker or '(start)'}: "
                "its next scan lists again from there.",
            )
            return redirect(back)
    return render(
        request,
        "processes/reset_marker.html",
        {
            "step": step,
            "plan": planned,
            "error": error,
            "key": data.get("key", "")[: markers.KEY_LENGTH],
            "key_length": markers.KEY_LENGTH,
            "since": data.get("since", "")[:40],
            "invalid": form.is_bound and not form.is_valid(),
            "back": back,
        },
    )
