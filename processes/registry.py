"""Registering jobs and their steps: one transaction, validated as a whole.

Errors are ``django.core.exceptions.ValidationError`` keyed by the field at fault, so that
forms, the API and the CLI can all say which input was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction

from processes.models import BusDomain, Process, ProcessType, Property

Properties = Mapping[str, Mapping[str, str]]  # config_group -> key -> value


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


def set_properties(process: Process, properties: Properties) -> None:
    for group, values in properties.items():
        for key, value in values.items():
            Property.objects.update_or_create(
                process=process, config_group=group, key=key, defaults={"value": str(value)}
            )


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

    edges: dict[str, list[str]] = {}
    for index, spec in enumerate(steps):
        if spec.next is None:
            edges[spec.name] = [steps[index + 1].name] if index + 1 < len(steps) else []
        else:
            unknown = set(spec.next) - set(names)
            if unknown:
                raise ValidationError(
                    {"next_processes": f"{spec.name}: unknown steps {sorted(unknown)}"}
                )
            edges[spec.name] = list(spec.next)
    _check_acyclic(edges)

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
