"""Registering jobs, their steps and templates: each change one transaction, validated as a
whole.

Errors are ``django.core.exceptions.ValidationError`` keyed by the field at fault, so that
forms, the API and the CLI can all say which input was wrong; a change the current state
forbids (deleting a running job) is a :class:`bdre.errors.Conflict`.

A whole pipeline travels as a *document* (``export_job`` writes it, the API's pipeline and
import endpoints and ``manage.py import_job`` read it): names instead of ids, so that it can
move between installations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction

from batches.models import File
from bdre.errors import Conflict
from processes import schedules
from processes.jobs import checks
from processes.models import (
    BusDomain,
    ExecState,
    Process,
    ProcessTemplate,
    ProcessTemplateProperty,
    ProcessType,
    Property,
)
from processes.workflow import NextLinks

Properties = Mapping[str, Mapping[str, str]]  # config_group -> key -> value
GROUP_LENGTH = Property._meta.get_field("config_group").max_length
KEY_LENGTH = Property._meta.get_field("key").max_length


@dataclass
class StepSpec:
    name: str
    process_type_id: int
    description: str = ""
    can_recover: bool = True
    upstream: list[int] = field(default_factory=list)  # ids of upstream jobs
    batch_cut_pattern: str = ""
    next: list[str] | None = None  # names of the steps after this one; None: the next in order
    properties: Properties = field(default_factory=dict)


def _check_acyclic(edges: Mapping[str, Iterable[str]]) -> None:
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            cycle = " -> ".join([*path[path.index(node) :], node])
            raise ValidationError({"next_processes": f"The steps form a cycle: {cycle}"})
        state[node] = 1
        for after in edges.get(node, ()):
            visit(after, [*path, node])
        state[node] = 2

    for node in edges:
        visit(node, [])


def check_workflow(steps: Iterable[Mapping | StepSpec | TemplateStepSpec]) -> dict[str, list[str]]:
    """The links between steps by name (``next`` absent or None: the next one listed);
    a ValidationError on ``next_processes`` for an unknown name or a cycle."""
    rows = [s if isinstance(s, Mapping) else vars(s) for s in steps]
    names = [r["name"] for r in rows]
    edges: dict[str, list[str]] = {}
    for index, row in enumerate(rows):
        after = row.get("next")
        edges[row["name"]] = names[index + 1 : index + 2] if after is None else list(after)
        unknown = set(edges[row["name"]]) - set(names)
        if unknown:
            raise ValidationError(
                {"next_processes": f"{row['name']}: unknown steps {sorted(unknown)}"}
            )
    _check_acyclic(edges)
    return edges


def check_properties(properties: Properties, owner: str) -> None:
    """A ValidationError on ``properties`` for a group or key longer than its column, which
    PostgreSQL would refuse at the insert (and SQLite keep)."""
    for group, values in properties.items():
        names = [("config group", group, GROUP_LENGTH)]
        names += [("key", key, KEY_LENGTH) for key in values]
        for what, text, limit in names:
            if len(text) > limit:
                raise ValidationError(
                    {
                        "properties": f"{owner}: a {what} has at most {limit} characters; "
                        f"{text[:20]}... has {len(text)}."
                    }
                )


def check_step_properties(
    kind: str, properties: Properties, owner: str, field: str = "properties", *, team_id: int
) -> None:
    """A ValidationError on ``field`` for a property the step kind refuses to run: a Spark SQL
    statement outside the sandbox, a callable outside ``BDRE_CALLABLES``, a location outside
    the team's storage roots (docs/security.md)."""
    try:
        checks.check_step_properties(kind, properties, team_id=team_id)
    except checks.REFUSED as exc:
        raise ValidationError({field: f"{owner}: {exc}"}) from exc


def set_properties(process: Process, properties: Properties) -> None:
    check_properties(properties, process.name)
    check_step_properties(
        process.process_type.job_kind,
        properties,
        process.name,
        team_id=process.bus_domain.team_id,
    )
    for group, values in properties.items():
        for key, value in values.items():
            Property.objects.update_or_create(
                process=process, config_group=group, key=key, defaults={"value": str(value)}
            )


# --- names are per team -------------------------------------------------------------------


def lock_teams(*team_ids: int | None) -> None:
    """Hold the teams' rows until the transaction ends, so that checking a team's names and
    inserting them is one step for concurrent registrations in any of its applications (the
    database holds a name only per application). ``FOR NO KEY UPDATE``: inserts that point
    at the team (its applications, members) go on. In id order, before any process row is
    locked, so that two registrations never wait for each other; SQLite serialises writers
    anyway (immediate transactions)."""
    wanted = sorted({pk for pk in team_ids if pk is not None})
    list(
        Group.objects.select_for_update(no_key=True)
        .filter(pk__in=wanted)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def check_names(team: Group, names: Iterable[str], *, exclude: Iterable[int] = ()) -> None:
    """A ValidationError on ``name`` when one of ``names`` is a live process (job or step) of
    ``team`` other than those with ids in ``exclude``. Only the team's own processes are
    looked at, so the answer never tells whether another team uses a name (docs/security.md,
    "Names are per team"). Call it after :func:`lock_teams`."""
    taken = sorted(
        Process.objects.filter(name__in=set(names), deleted=False, bus_domain__team=team)
        .exclude(pk__in=list(exclude))
        .values_list("name", flat=True)
        .distinct()
    )
    if len(taken) == 1:
        raise ValidationError(
            {"name": f"A process named {taken[0]} exists already in team {team}."}
        )
    if taken:
        listed = ", ".join(taken)
        raise ValidationError({"name": f"Processes named {listed} exist already in team {team}."})


def move_application(application: BusDomain, team: Group) -> None:
    """Before ``application`` changes team (in the caller's transaction): its job names must
    be free in ``team``, and its registered files go with it (a file is registered once per
    team, ``File.team``), so a scan after the move does not register them again."""
    check_application_move(application, team)
    File.objects.filter(batch__bus_domain=application).update(team=team)


def check_application_move(application: BusDomain, team: Group) -> None:
    """A ValidationError on ``team`` when the live processes of ``application`` have names
    that ``team``'s own processes use: they would be two of one name in one team. Call it in
    the transaction that moves the application (the caller is a member of ``team``, whose
    names he may read)."""
    lock_teams(application.team_id, team.pk)
    names = application.processes.filter(deleted=False).values_list("name", flat=True)
    try:
        check_names(team, names, exclude=application.processes.values_list("pk", flat=True))
    except ValidationError as exc:
        raise ValidationError(
            {"team": f"{exc.message_dict['name'][0]} Rename them before moving {application}."}
        ) from exc


@transaction.atomic
def create_job(
    *,
    bus_domain: BusDomain,
    name: str,
    process_type_id: int,
    steps: list[StepSpec],
    description: str = "",
    properties: Properties | None = None,
    max_retries: int = 3,
    lease_seconds: int = 3600,
) -> Process:
    """Create a job with its steps, their workflow links, upstream jobs and properties."""
    job_type = ProcessType.objects.filter(pk=process_type_id).first()
    if job_type is None or job_type.is_step_type:
        raise ValidationError({"process_type": f"{process_type_id} is not a job (parent) type"})
    if not steps:
        raise ValidationError({"steps": "A job needs at least one step"})
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        raise ValidationError({"steps": "Step names must be unique"})
    if name in names:
        raise ValidationError({"steps": f"{name}: a step is not named like its job"})
    lock_teams(bus_domain.team_id)
    check_names(bus_domain.team, [name, *names])

    job = Process(
        name=name,
        description=description,
        bus_domain=bus_domain,
        process_type=job_type,
        max_retries=max_retries,
        lease_seconds=lease_seconds,
    )
    job.full_clean()
    job.save()

    edges = check_workflow(steps)

    created: dict[str, Process] = {}
    for spec in steps:
        step_type = ProcessType.objects.filter(pk=spec.process_type_id).first()
        if step_type is None or not step_type.is_step_type:
            raise ValidationError(
                {"process_type": f"{spec.name}: {spec.process_type_id} is not a step type"}
            )
        if spec.batch_cut_pattern and not spec.upstream:
            raise ValidationError(
                {"batch_cut_pattern": f"{spec.name}: a cut pattern needs an upstream job"}
            )
        upstream = list(Process.objects.filter(pk__in=spec.upstream, deleted=False))
        if len(upstream) != len(set(spec.upstream)) or any(not u.is_job for u in upstream):
            raise ValidationError(
                {"enqueuing_processes": f"{spec.name}: every upstream must be a live job"}
            )
        step = Process(
            name=spec.name,
            description=spec.description,
            bus_domain=bus_domain,
            process_type=step_type,
            parent=job,
            can_recover=spec.can_recover,
            batch_cut_pattern=spec.batch_cut_pattern,
            max_retries=max_retries,
            lease_seconds=lease_seconds,
        )
        step.full_clean()
        step.save()
        step.enqueuing_processes.set(upstream)
        set_properties(step, spec.properties)
        created[spec.name] = step

    for step_name, after in edges.items():
        created[step_name].next_processes.set([created[n] for n in after])
    has_predecessor = {n for after in edges.values() for n in after}
    job.next_processes.set([created[n] for n in names if n not in has_predecessor])
    set_properties(job, properties or {})
    return job


# --- whole pipelines ----------------------------------------------------------------------


@dataclass
class JobSpec:
    name: str
    bus_domain: BusDomain
    process_type_id: int
    steps: list[StepSpec]
    description: str = ""
    properties: Properties = field(default_factory=dict)
    max_retries: int = 3
    lease_seconds: int = 3600
    schedule: schedules.Schedule | None = None


@transaction.atomic
def register_pipeline(spec: JobSpec, *, template: ProcessTemplate | None = None) -> Process:
    """A job with its steps, links, properties and schedule, in one transaction: nothing is
    left behind when any part of it is invalid."""
    job = create_job(
        bus_domain=spec.bus_domain,
        name=spec.name,
        process_type_id=spec.process_type_id,
        steps=spec.steps,
        description=spec.description,
        properties=spec.properties,
        max_retries=spec.max_retries,
        lease_seconds=spec.lease_seconds,
    )
    if template is not None:
        by_name = {t.name: t for t in template.steps.filter(deleted=False)}
        job.process_template = template
        job.save(update_fields=["process_template"])
        for step in job.steps.all():
            step.process_template = by_name.get(step.name.removeprefix(f"{job.name}_"))
            step.save(update_fields=["process_template"])
    if spec.schedule is not None:
        schedules.set_schedule(job.pk, spec.schedule)
    return job


def _properties_of(rows) -> dict[str, dict[str, str]]:
    grouped: dict[str, dict[str, str]] = {}
    for row in rows:
        if row.config_group == "schedule":  # kept by the schedule section
            continue
        grouped.setdefault(row.config_group, {})[row.key] = row.value
    return grouped


def export_job(job: Process) -> dict:
    """The job as a document that ``register_pipeline`` (through the API's import or
    ``manage.py import_job``) turns back into the same job: names, not ids."""
    from processes.workflow import predecessors, steps_in_order

    steps = steps_in_order(job)
    before = predecessors(steps)
    after: dict[int, list[str]] = {s.pk: [] for s in steps}
    for step in steps:
        for pk in sorted(before[step.pk]):
            after[pk].append(step.name)
    schedule = schedules.schedule_of(job.pk)
    document = {
        "format": "bdre.pipeline/1",
        "name": job.name,
        "application": job.bus_domain.name,
        "process_type": job.process_type.name,
        "description": job.description,
        "max_retries": job.max_retries,
        "lease_seconds": job.lease_seconds,
        "properties": _properties_of(job.properties.all()),
        "steps": [
            {
                "name": step.name,
                "process_type": step.process_type.name,
                "description": step.description,
                "can_recover": step.can_recover,
                "upstream": sorted(
                    step.enqueuing_processes.filter(deleted=False).values_list("name", flat=True)
                ),
                "batch_cut_pattern": step.batch_cut_pattern,
                "next": after[step.pk],
                "properties": _properties_of(step.properties.all()),
            }
            for step in steps
        ],
        "schedule": None,
    }
    if schedule.is_timed or schedule.on_upstream:
        document["schedule"] = {
            "cron": schedule.cron,
            "every_seconds": schedule.every_seconds,
            "timezone": schedule.timezone,
            "enabled": schedule.enabled,
            "on_upstream": schedule.on_upstream,
        }
    return document


# --- one process at a time ----------------------------------------------------------------


@dataclass
class ProcessChanges:
    """The writable fields of a process; ``None`` in ``enqueuing``/``next`` keeps the links."""

    name: str
    bus_domain: BusDomain
    process_type: ProcessType
    parent: Process | None = None
    description: str = ""
    can_recover: bool = True
    batch_cut_pattern: str = ""
    max_retries: int = 3
    lease_seconds: int = 3600
    enqueuing: list[Process] | None = None
    next: list[Process] | None = None


def _check_process(instance: Process | None, c: ProcessChanges) -> None:
    errors: dict[str, str] = {}
    names, own = [c.name], []
    if instance is not None:
        own.append(instance.pk)
        if instance.is_job and c.bus_domain.team_id != instance.bus_domain.team_id:
            # A job moving to another team takes its steps' names there too.
            for pk, name in instance.steps.filter(deleted=False).values_list("pk", "name"):
                own.append(pk)
                names.append(name)
    try:
        check_names(c.bus_domain.team, names, exclude=own)
    except ValidationError as exc:
        errors["name"] = exc.message_dict["name"][0]
    kind = c.process_type
    if kind.is_step_type and c.parent is None:
        errors["parent"] = f"A step (type {kind.name}) needs a parent job."
    elif not kind.is_step_type and c.parent is not None:
        errors["parent"] = f"Type {kind.name} is a job type: a job has no parent."
    elif c.parent is not None:
        if not c.parent.is_job or c.parent.deleted:
            errors["parent"] = f"{c.parent.name} is not a live job."
        elif c.parent.bus_domain_id != c.bus_domain.pk:
            errors["bus_domain"] = "A step belongs to the application of its job."
    if instance is not None and instance.parent_id != (c.parent.pk if c.parent else None):
        errors["parent"] = "A process cannot move to another job."
    enqueuing = c.enqueuing if c.enqueuing is not None else _links(instance, "enqueuing")
    for upstream in enqueuing:
        if not upstream.is_job:
            errors["enqueuing_processes"] = (
                f"{upstream.name} is a step, not a job: an upstream must be a job."
            )
        elif upstream.deleted:
            errors["enqueuing_processes"] = f"{upstream.name} is deleted."
        elif c.parent is not None and upstream.pk == c.parent.pk:
            errors["enqueuing_processes"] = "A step cannot consume its own job's batches."
    if enqueuing and c.parent is None:
        errors["enqueuing_processes"] = "Only steps consume upstream batches, not jobs."
    if c.batch_cut_pattern and not enqueuing:
        errors["batch_cut_pattern"] = "A cut pattern needs an upstream job (enqueuing_processes)."
    if c.next is not None:
        errors.update(_check_next(instance, c))
    if errors:
        raise ValidationError(errors)


def _links(instance: Process | None, which: str) -> list[Process]:
    if instance is None:
        return []
    related = instance.enqueuing_processes if which == "enqueuing" else instance.next_processes
    return list(related.all())


def _check_next(instance: Process | None, c: ProcessChanges) -> dict[str, str]:
    job_id = instance.pk if c.parent is None and instance is not None else None
    for target in c.next or []:
        if c.parent is None:
            if job_id is None or target.parent_id != job_id:
                return {"next_processes": f"{target.name} is not a step of this job."}
        elif target.parent_id != c.parent.pk:
            return {"next_processes": f"{target.name} is not a step of the same job."}
        if instance is not None and target.pk == instance.pk:
            return {"next_processes": "A step cannot follow itself."}
        if target.deleted:
            return {"next_processes": f"{target.name} is deleted."}
    if c.parent is None or instance is None:
        return {}
    # The links between the job's steps as they will be, this step's replaced.
    edges: dict[str, list[str]] = {}
    for src, dst in NextLinks.objects.filter(
        from_process__parent_id=c.parent.pk, from_process__deleted=False
    ).values_list("from_process__name", "to_process__name"):
        edges.setdefault(src, []).append(dst)
    edges[instance.name] = [t.name for t in c.next or []]
    try:
        _check_acyclic(edges)
    except ValidationError as exc:
        return {"next_processes": exc.message_dict["next_processes"][0]}
    return {}


@transaction.atomic
def create_process(changes: ProcessChanges) -> Process:
    """One job (without steps yet) or one step of an existing job."""
    lock_teams(changes.bus_domain.team_id)
    _check_process(None, changes)
    process = Process(
        name=changes.name,
        description=changes.description,
        bus_domain=changes.bus_domain,
        process_type=changes.process_type,
        parent=changes.parent,
        can_recover=changes.can_recover,
        batch_cut_pattern=changes.batch_cut_pattern,
        max_retries=changes.max_retries,
        lease_seconds=changes.lease_seconds,
    )
    process.full_clean(validate_constraints=False)
    process.save()
    process.enqueuing_processes.set(changes.enqueuing or [])
    process.next_processes.set(changes.next or [])
    return process


@transaction.atomic
def update_process(process_id: int, changes: ProcessChanges) -> Process:
    team_now = Process.objects.filter(pk=process_id).values_list("bus_domain__team", flat=True)
    lock_teams(team_now.first(), changes.bus_domain.team_id)
    process = Process.objects.select_for_update().get(pk=process_id, deleted=False)
    _check_process(process, changes)
    moved = process.bus_domain_id != changes.bus_domain.pk
    retyped = process.process_type_id != changes.process_type.pk
    for name in (
        "name",
        "description",
        "bus_domain",
        "process_type",
        "can_recover",
        "batch_cut_pattern",
        "max_retries",
        "lease_seconds",
    ):
        setattr(process, name, getattr(changes, name))
    process.full_clean(validate_constraints=False)
    process.save()
    if changes.enqueuing is not None:
        process.enqueuing_processes.set(changes.enqueuing)
    if changes.next is not None:
        process.next_processes.set(changes.next)
    if moved and process.is_job:
        process.steps.update(bus_domain=changes.bus_domain)
    # What a step may run depends on its kind and team: a kind or team it now has checks
    # the properties it kept (another team's roots, a kind that reads its value otherwise).
    changed = [process] if retyped else []
    if moved:
        changed = [process, *process.steps.filter(deleted=False)]
    for step in changed:
        check_step_properties(
            step.process_type.job_kind,
            _properties_of(step.properties.all()),
            step.name,
            team_id=changes.bus_domain.team_id,
        )
    return process


@transaction.atomic
def delete_process(process_id: int) -> None:
    """Mark a job and its steps deleted (their runs, batches and lineage stay), or a single
    step, whose predecessors are linked to its successors so the workflow stays whole."""
    process = Process.objects.select_for_update().get(pk=process_id, deleted=False)
    job = process if process.is_job else process.parent
    if job.runs.filter(exec_state_id=ExecState.RUNNING).exists():
        raise Conflict(f"{job.name} is running: terminate it first.")
    if process.is_job:
        consumers = Process.objects.filter(enqueuing_processes=process, deleted=False)
        names = sorted(consumers.exclude(parent=process).values_list("name", flat=True))
        if names:
            raise Conflict(f"{', '.join(names)} consume the batches of {process.name}.")
        process.steps.update(deleted=True)
    else:
        before = list(process.previous_processes.filter(deleted=False))
        after = list(process.next_processes.filter(deleted=False))
        for predecessor in before:
            predecessor.next_processes.remove(process)
            predecessor.next_processes.add(*after)
    process.deleted = True
    process.save(update_fields=["deleted"])  # the schedule goes with it (processes.signals)


# --- templates ----------------------------------------------------------------------------


@dataclass
class TemplateStepSpec:
    name: str
    process_type_id: int
    description: str = ""
    can_recover: bool = True
    batch_cut_pattern: str = ""
    next: list[str] | None = None
    properties: Properties = field(default_factory=dict)


@dataclass
class TemplateSpec:
    name: str
    bus_domain: BusDomain
    process_type_id: int
    steps: list[TemplateStepSpec]
    description: str = ""
    properties: Properties = field(default_factory=dict)


def _template_properties(template: ProcessTemplate, properties: Properties) -> None:
    check_properties(properties, template.name)
    for group, values in properties.items():
        for key, value in values.items():
            ProcessTemplateProperty.objects.update_or_create(
                template=template, config_group=group, key=key, defaults={"value": str(value)}
            )


@transaction.atomic
def save_template(spec: TemplateSpec, template_id: int | None = None) -> ProcessTemplate:
    """Create a job template with its step templates, or replace one as a whole."""
    kind = ProcessType.objects.filter(pk=spec.process_type_id).first()
    if kind is None or kind.is_step_type:
        raise ValidationError({"process_type": f"{spec.process_type_id} is not a job type"})
    if not spec.steps:
        raise ValidationError({"steps": "A template needs at least one step"})
    names = [s.name for s in spec.steps]
    if len(set(names)) != len(names):
        raise ValidationError({"steps": "Step names must be unique"})
    clash = ProcessTemplate.objects.filter(
        bus_domain=spec.bus_domain, name=spec.name, parent=None, deleted=False
    ).exclude(pk=template_id)
    if clash.exists():
        raise ValidationError({"name": f"A template named {spec.name} exists already."})
    edges = check_workflow(spec.steps)
    if template_id is None:
        template = ProcessTemplate(parent=None)
    else:
        template = ProcessTemplate.objects.select_for_update().get(pk=template_id, deleted=False)
        template.steps.all().delete()
        template.properties.all().delete()
    template.name = spec.name
    template.description = spec.description
    template.bus_domain = spec.bus_domain
    template.process_type = kind
    template.full_clean(validate_constraints=False)
    template.save()
    _template_properties(template, spec.properties)
    created: dict[str, ProcessTemplate] = {}
    for step in spec.steps:
        step_type = ProcessType.objects.filter(pk=step.process_type_id).first()
        if step_type is None or not step_type.is_step_type:
            raise ValidationError(
                {"process_type": f"{step.name}: {step.process_type_id} is not a step type"}
            )
        row = ProcessTemplate(
            name=step.name,
            description=step.description,
            bus_domain=spec.bus_domain,
            process_type=step_type,
            parent=template,
            can_recover=step.can_recover,
            batch_cut_pattern=step.batch_cut_pattern,
        )
        row.full_clean(validate_constraints=False)
        row.save()
        _template_properties(row, step.properties)
        created[step.name] = row
    for step_name, after in edges.items():
        created[step_name].next_templates.set([created[n] for n in after])
    has_predecessor = {n for after in edges.values() for n in after}
    template.next_templates.set([created[n] for n in names if n not in has_predecessor])
    return template


def delete_template(template_id: int) -> None:
    ProcessTemplate.objects.filter(pk=template_id).update(deleted=True)
    ProcessTemplate.objects.filter(parent_id=template_id).update(deleted=True)


def template_steps(template: ProcessTemplate) -> list[tuple[ProcessTemplate, list[str]]]:
    """The step templates in workflow order, each with the names of the steps after it."""
    steps = {s.pk: s for s in template.steps.filter(deleted=False).order_by("id")}
    links = ProcessTemplate.next_templates.through.objects.filter(from_processtemplate_id__in=steps)
    after: dict[int, list[str]] = {pk: [] for pk in steps}
    indegree = dict.fromkeys(steps, 0)
    for src, dst in links.values_list("from_processtemplate_id", "to_processtemplate_id"):
        if dst in steps:
            after[src].append(steps[dst].name)
            indegree[dst] += 1
    ordered, ready = [], sorted(pk for pk, n in indegree.items() if n == 0)
    while ready:
        pk = ready.pop(0)
        ordered.append(pk)
        for name in after[pk]:
            dst = next(k for k, s in steps.items() if s.name == name)
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
        ready.sort()
    return [(steps[pk], sorted(after[pk])) for pk in ordered]


def instantiate(
    template: ProcessTemplate,
    *,
    name: str,
    bus_domain: BusDomain,
    upstream: Mapping[str, list[int]] | None = None,
    properties: Properties | None = None,
    schedule: schedules.Schedule | None = None,
) -> Process:
    """A job made from a template: step ``s`` of the template becomes ``<name>_<s>``, with the
    template's properties, overridden by ``properties`` (``"step name.group"`` or ``"group"``
    as the group key for a step's or the job's own), and the upstream jobs given per step
    name."""
    upstream = dict(upstream or {})
    overrides = dict(properties or {})
    steps = template_steps(template)
    unknown = set(upstream) - {s.name for s, _ in steps}
    if unknown:
        raise ValidationError({"upstream": f"The template has no steps {sorted(unknown)}"})

    def merged(row: ProcessTemplate, prefix: str) -> dict[str, dict[str, str]]:
        values: dict[str, dict[str, str]] = {}
        for p in row.properties.all():
            values.setdefault(p.config_group, {})[p.key] = p.value
        for group, given in overrides.items():
            head, _, rest = group.rpartition(".")
            if head == prefix:
                values.setdefault(rest, {}).update({k: str(v) for k, v in given.items()})
        return values

    spec = JobSpec(
        name=name,
        bus_domain=bus_domain,
        process_type_id=template.process_type_id,
        description=template.description,
        properties=merged(template, ""),
        schedule=schedule,
        steps=[
            StepSpec(
                name=f"{name}_{step.name}",
                process_type_id=step.process_type_id,
                description=step.description,
                can_recover=step.can_recover,
                upstream=list(upstream.get(step.name, [])),
                batch_cut_pattern=step.batch_cut_pattern,
                next=[f"{name}_{n}" for n in after],
                properties=merged(step, step.name),
            )
            for step, after in steps
        ],
    )
    try:
        return register_pipeline(spec, template=template)
    except ValidationError as exc:
        if "batch_cut_pattern" in exc.message_dict:
            raise ValidationError({"upstream": exc.message_dict["batch_cut_pattern"]}) from exc
        raise


@transaction.atomic
def template_from_job(job: Process, *, name: str, description: str = "") -> ProcessTemplate:
    """Save a job's shape as a template: its steps (named without the job's prefix, as
    ``instantiate`` adds the new job's), their kinds, links, cut patterns and properties.
    Upstream jobs and the schedule are given when a job is made from it."""
    document = export_job(job)
    prefix = f"{job.name}_"

    def short(step_name: str) -> str:
        return step_name[len(prefix) :] if step_name.startswith(prefix) else step_name

    types = dict(ProcessType.objects.values_list("name", "pk"))
    return save_template(
        TemplateSpec(
            name=name,
            bus_domain=job.bus_domain,
            process_type_id=job.process_type_id,
            description=description or document["description"],
            properties={g: v for g, v in document["properties"].items() if g != "schedule"},
            steps=[
                TemplateStepSpec(
                    name=short(step["name"]),
                    process_type_id=types[step["process_type"]],
                    description=step["description"],
                    can_recover=step["can_recover"],
                    batch_cut_pattern=step["batch_cut_pattern"],
                    next=[short(n) for n in step["next"]],
                    properties=step["properties"],
                )
                for step in document["steps"]
            ],
        )
    )
