"""Whole pipelines: a job with its steps, links, properties and schedule registered in one
transaction, and the same job written as a portable *document* (names instead of ids, so
that it can move between installations): ``export_job`` writes it, the API's pipeline and
import endpoints and ``manage.py import_job`` read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from processes import schedules
from processes.models import BusDomain, Process, ProcessTemplate, grouped_properties
from processes.registry.jobs import StepSpec, create_job
from processes.registry.properties import Properties
from processes.workflow import predecessors, steps_in_order


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


def export_job(job: Process) -> dict[str, Any]:
    """The job as a document that ``register_pipeline`` (through the API's import or
    ``manage.py import_job``) turns back into the same job: names, not ids."""
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
        "properties": grouped_properties(job.properties.all()),
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
                "properties": grouped_properties(step.properties.all()),
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
