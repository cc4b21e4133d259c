"""Registering jobs and their steps: a job with its steps at once (``create_job``), or one
process at a time (``create_process``, ``update_process``, ``delete_process``); each change
one transaction, validated as a whole."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import transaction
from django.db.models import Field, Model

from bdre.errors import Conflict
from processes.models import BusDomain, ExecState, Process, ProcessType, grouped_properties
from processes.registry.graph import check_acyclic, check_workflow
from processes.registry.names import check_names, lock_teams
from processes.registry.properties import (
    Properties,
    check_step_properties,
    set_properties,
)
from processes.workflow import NextLinks


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


# --- the rules of a job and its steps, each said once ----------------------------------------

CUT_NEEDS_UPSTREAM = "A cut pattern needs an upstream job."
NEEDS_A_STEP = "A job needs at least one step"


def job_type(process_type_id: int) -> ProcessType:
    """The job type of that id; a ValidationError on ``process_type`` for a step type."""
    kind = ProcessType.objects.filter(pk=process_type_id).first()
    if kind is None:
        raise ValidationError({"process_type": f"{process_type_id} is not a job (parent) type"})
    if kind.is_step_type:
        raise ValidationError({"process_type": f"{kind.name} is a step type, not a job type."})
    return kind


def step_type(process_type_id: int, owner: str) -> ProcessType:
    """The step type of that id; a ValidationError on ``process_type`` for a job type."""
    kind = ProcessType.objects.filter(pk=process_type_id).first()
    if kind is None:
        raise ValidationError({"process_type": f"{owner}: {process_type_id} is not a step type"})
    if not kind.is_step_type:
        raise ValidationError(
            {"process_type": f"{owner}: {kind.name} is a job type, not a step type."}
        )
    return kind


def upstream_refused(upstream: Process, parent: Process | None = None) -> str | None:
    """Why ``upstream`` cannot feed a step of ``parent``, or None: it must be a live job,
    other than the step's own."""
    if not upstream.is_job:
        return f"{upstream.name} is a step, not a job: an upstream must be a job."
    if upstream.deleted:
        return f"{upstream.name} is deleted."
    if parent is not None and upstream.pk == parent.pk:
        return "A step cannot consume its own job's batches."
    return None


def check_name(name: str, owner: str | None = None, model: type[Model] = Process) -> None:
    """A ValidationError on ``name`` for a name the model refuses (its characters, its
    length); a step's messages say which step (``owner``)."""
    try:
        name_field = model._meta.get_field("name")
        assert isinstance(name_field, Field)  # a column, not a relation
        name_field.clean(name, None)
    except ValidationError as exc:
        prefix = f"{owner}: " if owner else ""
        raise ValidationError({"name": [prefix + m for m in exc.messages]}) from exc


def full_clean(
    row: Model,
    owner: str | None = None,
    *,
    validate_unique: bool = True,
    validate_constraints: bool = True,
) -> None:
    """The model's own checks of ``row`` (name, lengths); a step's messages say which step."""
    try:
        row.full_clean(validate_unique=validate_unique, validate_constraints=validate_constraints)
    except ValidationError as exc:
        if owner is None:
            raise
        raise ValidationError(
            {key: [f"{owner}: {m}" for m in messages] for key, messages in exc.message_dict.items()}
        ) from exc


def check_limits(max_retries: int, lease_seconds: int) -> dict[str, list[str]]:
    """The messages for a retry count or a lease under 1, by field."""
    errors = {}
    for name, value in (("max_retries", max_retries), ("lease_seconds", lease_seconds)):
        try:
            MinValueValidator(1)(value)
        except ValidationError as exc:
            errors[name] = exc.messages
    return errors


def _check_step(spec: StepSpec) -> tuple[ProcessType, list[Process]]:
    """A step of a new job: its name, its kind, its cut pattern and upstream jobs."""
    check_name(spec.name, spec.name)
    kind = step_type(spec.process_type_id, spec.name)
    if spec.batch_cut_pattern and not spec.upstream:
        raise ValidationError({"batch_cut_pattern": f"{spec.name}: {CUT_NEEDS_UPSTREAM}"})
    upstream = sorted(
        Process.objects.filter(pk__in=spec.upstream), key=lambda u: spec.upstream.index(u.pk)
    )
    if len(upstream) != len(set(spec.upstream)):
        raise ValidationError(
            {"enqueuing_processes": f"{spec.name}: every upstream must be a live job"}
        )
    for refused in filter(None, map(upstream_refused, upstream)):
        raise ValidationError({"enqueuing_processes": f"{spec.name}: {refused}"})
    return kind, upstream


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
    """Create a job with its steps, their workflow links, upstream jobs and properties. The
    document is checked first (names, kinds, upstream jobs, links), then the names taken in
    the team, then each row as it is written."""
    check_name(name)
    kind = job_type(process_type_id)
    if limits := check_limits(max_retries, lease_seconds):
        raise ValidationError(limits)
    if not steps:
        raise ValidationError({"steps": NEEDS_A_STEP})
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        raise ValidationError({"steps": "Step names must be unique"})
    if name in names:
        raise ValidationError({"steps": f"{name}: a step is not named like its job"})
    checked = {spec.name: _check_step(spec) for spec in steps}
    edges = check_workflow(steps)
    lock_teams(bus_domain.team_id)
    check_names(bus_domain.team, [name, *names])

    job = Process(
        name=name,
        description=description,
        bus_domain=bus_domain,
        process_type=kind,
        max_retries=max_retries,
        lease_seconds=lease_seconds,
    )
    job.full_clean()
    job.save()

    created: dict[str, Process] = {}
    for spec in steps:
        step_kind, upstream = checked[spec.name]
        step = Process(
            name=spec.name,
            description=spec.description,
            bus_domain=bus_domain,
            process_type=step_kind,
            parent=job,
            can_recover=spec.can_recover,
            batch_cut_pattern=spec.batch_cut_pattern,
            max_retries=max_retries,
            lease_seconds=lease_seconds,
        )
        full_clean(step, spec.name)
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

    @classmethod
    def of(cls, process: Process, **changed: object) -> ProcessChanges:
        """The process as it is, but for ``changed``; its links are kept unless given."""
        fields = {
            "name": process.name,
            "bus_domain": process.bus_domain,
            "process_type": process.process_type,
            "parent": process.parent,
            "description": process.description,
            "can_recover": process.can_recover,
            "batch_cut_pattern": process.batch_cut_pattern,
            "max_retries": process.max_retries,
            "lease_seconds": process.lease_seconds,
        }
        return cls(**{**fields, **changed})  # type: ignore[arg-type]


def _check_process(instance: Process | None, c: ProcessChanges) -> None:
    errors: dict[str, str | list[str]] = {}
    errors.update(check_limits(c.max_retries, c.lease_seconds))
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
        refused = upstream_refused(upstream, c.parent)
        if refused:
            errors["enqueuing_processes"] = refused
    if enqueuing and c.parent is None:
        errors["enqueuing_processes"] = "Only steps consume upstream batches, not jobs."
    if c.batch_cut_pattern and not enqueuing:
        errors["batch_cut_pattern"] = CUT_NEEDS_UPSTREAM
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
        check_acyclic(edges)
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
    process = Process.objects.select_for_update(no_key=True).get(pk=process_id, deleted=False)
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
            grouped_properties(step.properties.all()),
            step.name,
            team_id=changes.bus_domain.team_id,
        )
    return process


@transaction.atomic
def delete_process(process_id: int) -> None:
    """Mark a job and its steps deleted (their runs, batches and lineage stay), or a single
    step, whose predecessors are linked to its successors so the workflow stays whole."""
    process = Process.objects.select_for_update(no_key=True).get(pk=process_id, deleted=False)
    job = process.parent if process.parent is not None else process
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
