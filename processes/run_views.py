"""The runs page: every job run the user may see, with its trigger, duration, input batches
and rows, filtered by job, state, trigger and day, a page at a time; filtered by one job, its
duration trend above the list."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from bdre import charts
from bdre.access import scope
from processes import runs
from processes.filters import JobRunFilter
from processes.models import ExecState, InstanceExec, Process, Trigger

RUNS_PER_PAGE = 50
STATE_COLOURS = {
    ExecState.SUCCESS: "#3a9a5b",
    ExecState.FAILED: "#c8404d",
    ExecState.KILLED: "#c8404d",
    ExecState.RUNNING: "#1d5fbf",
}


def duration_trend(job: Process) -> SafeString | None:
    """The last runs of ``job`` as bars of their duration (None before its first run)."""
    last = runs.trend(job.pk)
    if not last:
        return None
    bars = [
        charts.Bar(
            label=str(run.pk),
            seconds=getattr(run, "duration_seconds", 0.0),
            colour=STATE_COLOURS.get(ExecState(run.exec_state_id), "#8a96a3"),
            tip=f"run {run.pk}: {run.exec_state.name.lower()}, "
            f"{charts.seconds_text(getattr(run, 'duration_seconds', 0.0))}, "
            f"started {run.start_ts:%Y-%m-%d %H:%M}",
            href=reverse("ui-run", args=[run.pk]),
        )
        for run in last
    ]
    title = f"Duration of the last {len(bars)} runs of {job.name}"
    return mark_safe(charts.duration_bars(title, bars))


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    visible = scope(
        request.user, InstanceExec.objects.filter(parent__isnull=True).with_resolution()
    )
    found = JobRunFilter(
        request.GET,
        queryset=visible.select_related("process", "exec_state").order_by("-id"),
    )
    page = Paginator(found.qs if found.is_valid() else visible.none(), RUNS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    page.object_list = list(page.object_list)
    runs.attach_totals(page.object_list)
    jobs = scope(request.user, Process.objects.live().jobs())
    query = request.GET.copy()
    query.pop("page", None)
    trend = None
    if found.is_valid() and found.form.cleaned_data.get("job") is not None:
        job = jobs.filter(pk=found.form.cleaned_data["job"]).first()
        trend = duration_trend(job) if job else None
    return render(
        request,
        "processes/runs.html",
        {
            "page": page,
            "errors": found.errors,
            "jobs": jobs.order_by("name"),
            # The value is the API's name; what a reader sees, words.
            "states": [(s.name, s.name.replace("_", " ").lower()) for s in ExecState],
            "triggers": Trigger.choices,
            "params": request.GET,
            "query": query.urlencode(),
            "trend": trend,
        },
    )
