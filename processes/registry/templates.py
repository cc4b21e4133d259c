"""Job templates: a job's shape (step templates, their kinds, links, cut patterns and
properties) saved once and made into jobs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.db import transaction

from processes import schedules
from processes.models import (
    BusDomain,
    Process,
    ProcessTemplate,
    ProcessTemplateProperty,
    ProcessType,
)
from processes.registry.graph import check_workflow
from processes.registry.jobs import StepSpec, check_name, full_clean, job_type, step_type
from processes.registry.pipelines import JobSpec, export_job, register_pipeline
from processes.registry.properties import Properties, check_properties
from processes.workflow import topological_order

NAME_FROM_TEMPLATE = 100  # a job made from a template: room for "_<step>" in its steps' names


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
    check_name(spec.name, model=ProcessTemplate)
    kind = job_type(spec.process_type_id)
    if not spec.steps:
        raise ValidationError({"steps": "A template needs at least one step"})
    names = [s.name for s in spec.steps]
    if len(set(names)) != len(names):
        raise ValidationError({"steps": "Step names must be unique"})
    step_kinds = {}
    for step in spec.steps:
        check_name(step.name, step.name, ProcessTemplate)
        step_kinds[step.name] = step_type(step.process_type_id, step.name)
    clash = ProcessTemplate.objects.filter(
        bus_domain=spec.bus_domain, name=spec.name, parent=None, deleted=False
    )
    if template_id is not None:
        clash = clash.exclude(pk=template_id)
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
        row = ProcessTemplate(
            name=step.name,
            description=step.description,
            bus_domain=spec.bus_domain,
            process_type=step_kinds[step.name],
            parent=template,
            can_recover=step.can_recover,
            batch_cut_pattern=step.batch_cut_pattern,
        )
        full_clean(row, step.name, validate_constraints=False)
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
    after: dict[int, list[int]] = {pk: [] for pk in steps}
    for src, dst in links.values_list("from_processtemplate_id", "to_processtemplate_id"):
        if dst in steps:
            after[src].append(dst)
    ordered, _ = topological_order(after)
    return [(steps[pk], sorted(steps[n].name for n in after[pk])) for pk in ordered]


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
    try:
        MaxLengthValidator(NAME_FROM_TEMPLATE)(name)
    except ValidationError as exc:
        raise ValidationError({"name": exc.messages}) from exc
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
