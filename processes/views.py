"""Pages of jobs and runs: the dashboard, a job (workflow, properties, schedule, runs,
queue; run now, terminate, pause and resume; its edit page), a run (steps, counters, logs;
refreshed while it runs). Each view parses, calls one service and renders; every list goes
through ``scope``; actions check the role and are refused (403) when forced."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model
from django.forms import BaseForm, BaseFormSet
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from bdre import charts
from bdre.access import Role, can, scope
from bdre.errors import BdreError, Conflict
from bdre.ids import is_id
from lineage import graphs
from processes import (
    counters,
    forms,
    logfiles,
    orchestrator,
    registry,
    run_views,
    scan_gate,
    schedules,
    tasks,
)
from processes.models import (
    SCHEDULE_GROUP,
    ExecState,
    InstanceExec,
    Process,
    ProcessLog,
    ProcessTemplate,
    Property,
)
from processes.registry import validate
from processes.selectors import dashboard as selectors
from processes.selectors import jobs as jobs_selector
from processes.selectors import run_io
from processes.step_kinds import expectations


def visible_jobs(request: HttpRequest):
    return scope(request.user, Process.objects.live().jobs())


def _job(request: HttpRequest, pk: int, role: Role = Role.VIEWER) -> Process:
    job = get_object_or_404(visible_jobs(request).select_related("bus_domain__team"), pk=pk)
    if role != Role.VIEWER and not can(request.user, job, role):
        raise PermissionDenied(f"This needs the {role.value} role in {job.bus_domain.team}.")
    return job


def _dashboard_context(request: HttpRequest) -> dict[str, Any]:
    jobs = visible_jobs(request)
    hours = selectors.hourly(jobs)
    labels = [h.start.strftime("%H:00") for h in hours]
    runs_chart = charts.stacked_bars(
        "Runs finished per hour, last 24 hours",
        labels,
        [
            ("succeeded", "#3a9a5b", [h.succeeded for h in hours]),
            ("failed", "#c8404d", [h.failed for h in hours]),
        ],
    )
    queue_chart = charts.line(
        "Batches waiting in the queue, last 24 hours", labels, [h.queued for h in hours]
    )
    rows = selectors.job_rows(jobs)
    return {
        "rows": rows,
        "runs_chart": mark_safe(runs_chart),
        "queue_chart": mark_safe(queue_chart),
        "totals": {
            "queued": sum(r.queue_depth for r in rows),
            "dead": sum(r.dead_letters for r in rows),
            "failures": sum(r.failures_24h for r in rows),
            "running": sum(
                1 for r in rows if r.last_run and r.last_run.exec_state_id == ExecState.RUNNING
            ),
        },
    }


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "processes/dashboard.html", _dashboard_context(request))


@login_required
def pipeline(request: HttpRequest) -> HttpResponse:
    """Every job the user may see as one graph (or an application's, ``?application=``),
    upstream to downstream, coloured by each one's last run, with their queues and the
    batches that flowed between them."""
    jobs = visible_jobs(request)
    applications = sorted(
        {(j.bus_domain_id, j.bus_domain.name) for j in jobs.select_related("bus_domain")},
        key=lambda a: a[1],
    )
    chosen = request.GET.get("application", "")
    if chosen:
        if not is_id(chosen) or int(chosen) not in {pk for pk, _ in applications}:
            raise Http404("no such application among your teams' jobs")
        jobs = jobs.filter(bus_domain_id=int(chosen))
    name = dict(applications).get(int(chosen)) if chosen else None
    graph = graphs.pipeline_graph(
        selectors.job_rows(jobs), f"Pipeline of {name}" if name else "Pipeline of your teams' jobs"
    )
    for node in graph.nodes.values():
        node.url = reverse("ui-job", args=[node.ref])
    return render(
        request,
        "processes/pipeline.html",
        {
            "graph": mark_safe(graphs.to_svg(graph)),
            "jobs": len(graph.nodes),
            "links": len(graph.edges),
            "applications": applications,
            "chosen": int(chosen) if chosen else None,
        },
    )


@login_required
def dashboard_live(request: HttpRequest) -> HttpResponse:
    """The dashboard's tiles, charts and jobs, fetched again by the page's script."""
    return render(request, "processes/_dashboard_live.html", _dashboard_context(request))


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job(request, pk)
    page = jobs_selector.job_page(job)
    for node in page.workflow.nodes.values():
        if node.kind == "job" and node.ref:
            node.url = f"/jobs/{node.ref}/"
    schedule = page.schedule
    return render(
        request,
        "processes/job.html",
        {
            "job": job,
            "steps": page.steps,
            "properties": page.properties,
            "workflow": mark_safe(graphs.to_svg(page.workflow)),
            "runs": page.runs,
            "trend": run_views.duration_trend(job),
            "queue": page.queue,
            "schedule": schedule,
            "last_checked": page.last_checked,
            "can_run": can(request.user, job, Role.DEVELOPER),
            "paused": schedule.paused,
            "schedule_form": forms.ScheduleFields(
                initial={
                    "every_seconds": schedule.every_seconds,
                    "cron": schedule.cron,
                    "timezone": schedule.timezone,
                    "on_upstream": schedule.on_upstream,
                }
            ),
            "template_form": forms.SaveTemplateForm(initial={"name": f"{job.name}_template"}),
            "running": page.running,
        },
    )


@login_required
@require_POST
def job_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    job = _job(request, pk, Role.DEVELOPER)
    try:
        if action == "run":
            started = tasks.start_run(job.pk, force=request.POST.get("force") == "yes")
            if isinstance(started, scan_gate.Quiet):
                messages.info(request, f"No run of {job.name} started: {started.detail}.")
            else:
                messages.success(request, _started(job, started, f"Run {started.instance_exec_id}"))
                return redirect("ui-run", pk=started.instance_exec_id)
        elif action == "terminate":
            run_id = orchestrator.terminate(job.pk, f"terminated by {request.user}")
            messages.success(request, f"Run {run_id} of {job.name} is terminated.")
        elif action == "pause":
            schedules.pause(job.pk)
            messages.success(
                request,
                f"{job.name} is paused: no schedule, upstream or replay trigger starts it.",
            )
        elif action == "resume":
            tasks.resume(job.pk)
            messages.success(request, f"{job.name} is resumed: its triggers start it again.")
    except BdreError as exc:
        messages.error(request, f"{exc.message} (error {exc.code})")
    return redirect("ui-job", pk=job.pk)


def _annotate(row: Model, **values: object) -> None:
    """Values for the template on a row, as a queryset's ``annotate`` would set them."""
    for name, value in values.items():
        setattr(row, name, value)


# The run page shows the last lines of each step's log (the live tail), or its lines that
# match the search; the download has them all.
LOG_TAIL_SHOWN = 200
LOG_MATCHES_SHOWN = 500
LOG_QUERY_MAX = 200


def _run_context(request: HttpRequest, pk: int) -> dict[str, Any]:
    run = get_object_or_404(
        scope(request.user, InstanceExec.objects.filter(parent__isnull=True)).select_related(
            "process", "exec_state", "target_batch"
        ),
        pk=pk,
    )
    steps = list(
        InstanceExec.objects.filter(parent=run)
        .select_related("process", "exec_state")
        .order_by("id")
    )
    first = run.start_ts
    # A running run and its running steps last until now: the page refreshes while they go.
    now = timezone.now() if run.exec_state_id == ExecState.RUNNING else run.start_ts
    last = max([s.end_ts or max(s.start_ts, now) for s in steps] + [run.end_ts or now])
    span = max((last - first).total_seconds(), 1.0)
    io = run_io.step_io(request.user, run, steps)
    for step in steps:
        end = step.end_ts or last
        _annotate(
            step,
            offset_pct=100 * (step.start_ts - first).total_seconds() / span,
            width_pct=max(100 * (end - step.start_ts).total_seconds() / span, 0.8),
            seconds=(end - step.start_ts).total_seconds(),
            labelled=counters.labelled(step.counters),
            adds_up=counters.how_they_add_up(step.counters),
            io=io[step.pk],
        )
    logs = ProcessLog.objects.filter(instance_exec__in=[run, *steps]).order_by("id")[:200]
    q = request.GET.get("q", "")[:LOG_QUERY_MAX]
    # Spark's progress is most of a Spark step's lines: shown on request only.
    progress = request.GET.get("progress") == "1"
    return {
        "progress": progress,
        "run": run,
        "steps": steps,
        "logs": logs,
        "q": q,
        "step_logs": [
            logfiles.read(
                step,
                q=q,
                tail=LOG_MATCHES_SHOWN if q else LOG_TAIL_SHOWN,
                progress=progress,
            )
            for step in steps
        ],
        "checks": [_shown_check(s.process.name, check) for s in steps for check in s.checks],
        "live": run.exec_state_id == ExecState.RUNNING,
        "duration": ((run.end_ts or last) - run.start_ts).total_seconds(),
        "failed": run.exec_state_id in ExecState.failed(),
        "resolved_by": run.resolved_by(),
        "can_retry": not run.process.deleted and can(request.user, run.process, Role.DEVELOPER),
    }


def _shown_check(step: str, check: dict[str, Any]) -> dict[str, Any]:
    """An expectation's result as the run page shows it: whether it failed, and its sample
    rows as pairs (a column named ``items``
    would be taken for the dict's method in a template)."""
    samples = [list(sample.items()) for sample in check.get("samples", [])]
    failing = expectations.is_failure(check)
    return {**check, "step": step, "failing": failing, "sample_pairs": samples}


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "processes/run.html", _run_context(request, pk))


def _started(job: Process, started: orchestrator.Started, what: str) -> str:
    """Who runs a run just started, and when: its first steps' queues, now."""
    if not started.ready:
        return f"{what} of {job.name} ended at once: every step had succeeded before."
    steps = Process.objects.filter(pk__in=started.ready).select_related("process_type")
    queues = sorted({orchestrator.queue_of(step) for step in steps})
    where = f"the workers of the {' and '.join(queues)} queue" + ("s" if len(queues) > 1 else "")
    return f"{what} of {job.name} started: its first steps are queued now for {where}."


@login_required
@require_POST
def run_retry(request: HttpRequest, pk: int) -> HttpResponse:
    """Retry a failed run: its dead letters put back and a run of its job started, which
    rebuilds its batch; the new run's page opens."""
    run = get_object_or_404(
        scope(request.user, InstanceExec.objects.filter(parent__isnull=True)).select_related(
            "process__bus_domain__team"
        ),
        pk=pk,
    )
    job = run.process
    if not can(request.user, job, Role.DEVELOPER):
        raise PermissionDenied(f"This needs the developer role in {job.bus_domain.team}.")
    try:
        started = tasks.retry_run(run.pk)
    except BdreError as exc:
        messages.error(request, f"{exc.message} (error {exc.code})")
        return redirect("ui-run", pk=run.pk)
    if isinstance(started, scan_gate.Quiet):
        messages.info(request, f"No run of {job.name} started: {started.detail}.")
        return redirect("ui-run", pk=run.pk)
    said = _started(job, started, f"Run {started.instance_exec_id}, retrying run {run.pk},")
    if started.target_batch_id != run.target_batch_id:
        said += (
            f" It builds batch {started.target_batch_id}, which waited longer; batch "
            f"{run.target_batch_id} is rebuilt by the run after it."
        )
    messages.success(request, said)
    return redirect("ui-run", pk=started.instance_exec_id)


@login_required
def run_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The changing part of the run page, fetched by the page's script while it runs."""
    return render(request, "processes/_run_live.html", _run_context(request, pk))


@login_required
def run_log(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's step logs (or one step run's: ``step``), the lines matching ``q`` only if
    given, as a text file to download."""
    run = get_object_or_404(
        scope(request.user, InstanceExec.objects.filter(parent__isnull=True)), pk=pk
    )
    step = request.GET.get("step", "")
    step_run_id = int(step) if is_id(step) else None
    if step and step_run_id is None:
        raise Http404("step must be a step run's id.")
    q = request.GET.get("q", "")[:LOG_QUERY_MAX]
    logs = logfiles.read_all(run, q=q, step_run_id=step_run_id)
    if step_run_id is not None and not logs:
        raise Http404(f"Run {run.pk} has no step run {step_run_id}.")
    name = f"run-{run.pk}" + (f"-step-{step_run_id}" if step_run_id else "") + ".log"
    response = HttpResponse(logfiles.as_text(logs), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# --- registration ------------------------------------------------------------------------------


def _step_formset(request: HttpRequest) -> forms.BaseStepFormSet:
    if request.method != "POST":
        return forms.StepFormSet(prefix="step", form_kwargs={"user": request.user})
    data = request.POST.copy()
    if "add_step" in data:
        _one_more_row(data, "step")
    return forms.StepFormSet(data, prefix="step", form_kwargs={"user": request.user})


def _one_more_row(data: QueryDict, prefix: str) -> None:
    """No script: one more empty row, the rest of the input kept as typed (a count that is
    no number is left for the formset to refuse)."""
    total = data.get(f"{prefix}-TOTAL_FORMS", "1")
    if total.isascii() and total.isdigit() and len(total) < 4:
        data[f"{prefix}-TOTAL_FORMS"] = str(int(total) + 1)


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    if not forms.developer_applications(request.user).exists():
        raise PermissionDenied("Registering a job needs the developer role in a team.")
    job_form = forms.JobForm(request.POST or None, user=request.user)
    steps = _step_formset(request)
    validation = None
    if "validate" in request.POST and job_form.is_valid() and steps.is_valid():
        validation = validate.validate_sql(
            job_form.cleaned_data["application"].team_id,
            [f.step_sql() for f in steps.filled()],
        )
    elif (
        request.method == "POST"
        and "add_step" not in request.POST
        and job_form.is_valid()
        and steps.is_valid()
    ):
        data = job_form.cleaned_data
        filled = steps.filled()
        try:
            job = registry.register_pipeline(
                registry.JobSpec(
                    name=data["name"],
                    bus_domain=data["application"],
                    process_type_id=data["job_type"].pk,
                    steps=[f.spec() for f in filled],
                    description=data["description"],
                    properties=data["properties"],
                    max_retries=data["max_retries"],
                    lease_seconds=data["lease_seconds"],
                    schedule=job_form.schedule(),
                )
            )
        except ValidationError as exc:
            forms.place_errors(exc, job_form, filled)
        else:
            count = "1 step" if len(filled) == 1 else f"{len(filled)} steps"
            messages.success(request, f"{job.name} is registered with {count}.")
            return redirect("ui-job", pk=job.pk)
    return render(
        request,
        "processes/job_new.html",
        {
            "form": job_form,
            "steps": steps,
            "kinds": forms.kind_reference(),
            "validation": validation,
        },
    )


@login_required
def job_from_template(request: HttpRequest) -> HttpResponse:
    if not forms.developer_applications(request.user).exists():
        raise PermissionDenied("Registering a job needs the developer role in a team.")
    form = forms.FromTemplateForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            job = registry.instantiate(
                data["template"],
                name=data["name"],
                bus_domain=data["application"],
                properties=data["properties"],
                schedule=form.schedule(),
            )
        except ValidationError as exc:
            forms.place_errors(exc, form, [])
        else:
            messages.success(request, f"{job.name} is registered from {data['template'].name}.")
            return redirect("ui-job", pk=job.pk)
    return render(request, "processes/job_from_template.html", {"form": form})


@login_required
def template_list(request: HttpRequest) -> HttpResponse:
    templates = scope(
        request.user, ProcessTemplate.objects.filter(parent__isnull=True, deleted=False)
    ).select_related("bus_domain__team", "process_type")
    rows = [
        (t, registry.template_steps(t), can(request.user, t, Role.ADMIN))
        for t in templates.order_by("name")
    ]
    return render(request, "processes/templates.html", {"rows": rows})


def _say_errors(request: HttpRequest, form: BaseForm) -> None:
    """A form posted from the job page: its errors come back there as a message."""
    # An ErrorList iterates as its messages' text (its stub's element type is wider).
    messages.error(
        request, " ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
    )


@login_required
@require_POST
def template_save(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job(request, pk, Role.DEVELOPER)
    form = forms.SaveTemplateForm(request.POST)
    if form.is_valid():
        try:
            template = registry.template_from_job(job, **form.cleaned_data)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"Template {template.name} is saved.")
            return redirect("ui-templates")
    else:
        _say_errors(request, form)
    return redirect("ui-job", pk=job.pk)


@login_required
@require_POST
def template_delete(request: HttpRequest, pk: int) -> HttpResponse:
    template = get_object_or_404(
        scope(request.user, ProcessTemplate.objects.filter(parent__isnull=True, deleted=False)),
        pk=pk,
    )
    if not can(request.user, template, Role.ADMIN):
        raise PermissionDenied("Deleting a template needs the admin role.")
    registry.delete_template(template.pk)
    messages.success(request, f"Template {template.name} is deleted.")
    return redirect("ui-templates")


def _edit_forms(
    request: HttpRequest, job: Process, steps: list[Process]
) -> tuple[forms.JobEditForm, BaseFormSet[forms.StepEditForm], forms.BaseNewStepFormSet]:
    """The job's fields, its steps' and new steps', as they are or as posted."""
    props: defaultdict[int, dict[str, dict[str, str]]] = defaultdict(dict)
    # The schedule group is the schedule's (its own section and service), not a property to
    # edit here: a line of it left out would take the job's trigger away.
    for prop in Property.objects.filter(process__in=[job, *steps]).exclude(
        config_group=SCHEDULE_GROUP
    ):
        props[prop.process_id].setdefault(prop.config_group, {})[prop.key] = prop.value
    job_initial = {
        "name": job.name,
        "description": job.description,
        "max_retries": job.max_retries,
        "lease_seconds": job.lease_seconds,
        "properties": forms.format_properties(props[job.pk]),
    }
    step_initial = [
        {
            "step": s.pk,
            "name": s.name,
            "kind": s.process_type.job_kind,
            "description": s.description,
            "properties": forms.format_properties(props[s.pk]),
            "after": ", ".join(
                n.name for n in s.next_processes.filter(deleted=False).order_by("id")
            ),
            "upstream": [u.pk for u in s.enqueuing_processes.all()],
        }
        for s in steps
    ]
    data = request.POST.copy() if request.method == "POST" else None
    if data is not None and "add_step" in data:
        _one_more_row(data, "new")
    return (
        forms.JobEditForm(data, initial=job_initial),
        forms.StepEditFormSet(
            data,
            initial=step_initial,
            prefix="step",
            form_kwargs={"steps": steps, "user": request.user},
        ),
        forms.NewStepFormSet(data, prefix="new"),
    )


@login_required
def job_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """The job, its properties and its steps edited at once (``registry.edit_job``): what
    the services refuse is said on the field at fault, and nothing is saved."""
    job = _job(request, pk, Role.DEVELOPER)
    steps = list(job.steps.filter(deleted=False).select_related("process_type").order_by("id"))
    job_form, step_forms, new_steps = _edit_forms(request, job, steps)
    validation = None
    if "validate" in request.POST and step_forms.is_valid() and new_steps.is_valid():
        validation = validate.validate_sql(
            job.bus_domain.team_id,
            [f.step_sql(steps) for f in step_forms if not f.cleaned_data.get("remove")]
            + [f.step_sql() for f in new_steps.filled()],
        )
    elif (
        request.method == "POST"
        and "add_step" not in request.POST
        and job_form.is_valid()
        and step_forms.is_valid()
        and new_steps.is_valid()
    ):
        data = job_form.cleaned_data
        added = new_steps.filled()
        try:
            registry.edit_job(
                job.pk,
                registry.JobEdit(
                    name=data["name"],
                    description=data["description"],
                    max_retries=data["max_retries"],
                    lease_seconds=data["lease_seconds"],
                    properties=data["properties"],
                    steps=[f.edit() for f in step_forms],
                    new_steps=[f.new_step() for f in added],
                ),
            )
        except ValidationError as exc:
            forms.place_errors(exc, job_form, [*step_forms, *added])
        except Conflict as exc:  # removing a step of a running job
            job_form.add_error(None, str(exc))
        else:
            messages.success(request, f"{data['name']} is saved.")
            return redirect("ui-job", pk=job.pk)
    return render(
        request,
        "processes/job_edit.html",
        {
            "job": job,
            "form": job_form,
            "steps": step_forms,
            "new_steps": new_steps,
            "kinds": forms.kind_reference(),
            "validation": validation,
            "running": InstanceExec.objects.filter(
                process=job, exec_state_id=ExecState.RUNNING
            ).first(),
        },
    )


@login_required
@require_POST
def schedule_edit(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job(request, pk, Role.DEVELOPER)
    form = forms.ScheduleFields(request.POST)
    if form.is_valid():
        try:
            schedules.change_timing(job.pk, form.schedule())
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"The schedule of {job.name} is saved.")
    else:
        _say_errors(request, form)
    return redirect("ui-job", pk=job.pk)
