"""Editing a registered job as a whole, as its page does: the job's fields and properties,
each step's description, properties, next steps and upstream jobs, steps removed and steps
added. One transaction made
of the one-process services the API calls (``update_process``, ``delete_process``,
``create_process``) and the properties' (``replace_properties``), so that the page and the
API accept and refuse the same things; nothing is kept when any part is refused."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction

from bdre.errors import Conflict
from processes.models import Process, ProcessType
from processes.registry.jobs import (
    NEEDS_A_STEP,
    ProcessChanges,
    create_process,
    delete_process,
    update_process,
)
from processes.registry.properties import Properties, replace_properties, set_properties


@dataclass
class StepEdit:
    """A step of the job as it is to be: its description and all its properties, or gone."""

    step_id: int
    description: str = ""
    properties: Properties = field(default_factory=dict)
    remove: bool = False
    next: list[str] | None = None  # the steps it leads to, by name; None: as they are
    upstream: list[int] | None = None  # the jobs whose batches it consumes; None: as they are


@dataclass
class NewStep:
    name: str
    process_type_id: int
    description: str = ""
    properties: Properties = field(default_factory=dict)
    after: list[str] = field(default_factory=list)  # the steps it follows; []: the last ones


@dataclass
class JobEdit:
    """The job as it is to be; steps not named in ``steps`` are left as they are."""

    name: str
    description: str = ""
    max_retries: int = 3
    lease_seconds: int = 3600
    properties: Properties = field(default_factory=dict)
    steps: list[StepEdit] = field(default_factory=list)
    new_steps: list[NewStep] = field(default_factory=list)


@contextmanager
def _said_of(step: str) -> Iterator[None]:
    """The one-process services say which field is at fault, not always which step: its
    messages are given the step's name (``"<step>: ..."``), as a whole job's are."""
    try:
        yield
    except ValidationError as exc:
        prefix = f"{step}: "
        raise ValidationError(
            {
                key: [m if m.startswith(prefix) else prefix + m for m in messages]
                for key, messages in exc.message_dict.items()
            }
        ) from exc


def _live_steps(job: Process) -> dict[str, Process]:
    return {s.name: s for s in job.steps.filter(deleted=False).order_by("id")}


@transaction.atomic
def edit_job(job_id: int, edit: JobEdit) -> Process:
    """Change the job, then its steps (removed first, so that a step added may take a
    removed one's name), then add the new steps, each after the steps it names (none: after
    the steps that are last then), and link the job to its first steps. A running job may be
    edited, as through the API, but not lose a step (``delete_process``: a Conflict)."""
    job = Process.objects.select_for_update(no_key=True).live().jobs().filter(pk=job_id).first()
    if job is None:  # deleted since the page was loaded
        raise Conflict("This job was deleted meanwhile: nothing was saved.")
    was = (job.max_retries, job.lease_seconds)
    job = update_process(
        job.pk,
        ProcessChanges.of(
            job,
            name=edit.name,
            description=edit.description,
            max_retries=edit.max_retries,
            lease_seconds=edit.lease_seconds,
        ),
    )
    replace_properties(job, edit.properties)
    _steps_follow_limits(job, was, edit)

    steps = {s.pk: s for s in job.steps.filter(deleted=False)}
    links_before = _links_of(steps)
    for change in edit.steps:
        step = steps.pop(change.step_id, None)  # each step once
        if step is None:
            raise ValidationError(
                {"steps": f"{change.step_id} is not a step of {job.name} (or is named twice)."}
            )
        with _said_of(step.name):
            if change.remove:
                delete_process(step.pk)
                continue
            step = update_process(step.pk, ProcessChanges.of(step, description=change.description))
            replace_properties(step, change.properties)

    for new in edit.new_steps:
        _add_step(job, new)
    _relink_steps(job, edit, links_before)
    return job


def _steps_follow_limits(job: Process, was: tuple[int, int], edit: JobEdit) -> None:
    """A step runs with its own retries and lease (create_job copies the job's): the steps
    that kept the job's values (``was``) follow them; one given its own through the API
    keeps it."""
    for column, old, value in (
        ("max_retries", was[0], edit.max_retries),
        ("lease_seconds", was[1], edit.lease_seconds),
    ):
        if old != value:
            job.steps.filter(deleted=False, **{column: old}).update(**{column: value})


def _links_of(steps: dict[int, Process]) -> dict[int, tuple[list[str], list[int]]]:
    """Each step's next steps (names) and upstream jobs (ids) before the edit: a step whose
    links are given as they were keeps the ones its job has by then (a step removed links
    the steps before it to those after it)."""
    return {
        pk: (
            sorted(step.next_processes.filter(deleted=False).values_list("name", flat=True)),
            sorted(step.enqueuing_processes.values_list("pk", flat=True)),
        )
        for pk, step in steps.items()
    }


def _relink_steps(
    job: Process, edit: JobEdit, links_before: dict[int, tuple[list[str], list[int]]]
) -> None:
    """The links last: a step may lead to a step added by the edit, never to one removed;
    then the job leads to the steps no step leads to."""
    live = _live_steps(job)
    by_id = {s.pk: s for s in live.values()}
    relinks: list[tuple[Process, StepEdit]] = []
    for change in edit.steps:
        step = by_id.get(change.step_id)
        if step is None:
            continue
        next_before, upstream_before = links_before.get(step.pk, ([], []))
        relink = StepEdit(
            step.pk,
            next=None if change.next is None or sorted(change.next) == next_before else change.next,
            upstream=(
                None
                if change.upstream is None or sorted(change.upstream) == upstream_before
                else change.upstream
            ),
        )
        if relink.next is not None or relink.upstream is not None:
            relinks.append((step, relink))
    # The next links that change are taken away first, then made: each new link is checked
    # against the links as the edit leaves them, not against one it takes away (a -> b
    # turned into b -> a is no cycle).
    for step, relink in relinks:
        if relink.next is not None:
            step.next_processes.clear()
    for step, relink in relinks:
        with _said_of(step.name):
            _relink(job, Process.objects.get(pk=step.pk), live, relink)
    if not live:
        raise ValidationError({"steps": NEEDS_A_STEP})
    followed = {
        s.pk for s in Process.objects.filter(previous_processes__in=live.values(), deleted=False)
    }
    update_process(
        job.pk, ProcessChanges.of(job, next=[s for s in live.values() if s.pk not in followed])
    )


def _relink(job: Process, step: Process, live: dict[str, Process], change: StepEdit) -> None:
    nxt = None
    if change.next is not None:
        unknown = [name for name in change.next if name not in live]
        if unknown:
            raise ValidationError(
                {"next_processes": f"{', '.join(unknown)}: no such step in {job.name}."}
            )
        nxt = [live[name] for name in change.next]
    upstream = None
    if change.upstream is not None:
        found = Process.objects.in_bulk(change.upstream)
        missing = [str(pk) for pk in change.upstream if pk not in found]
        if missing:
            raise ValidationError({"enqueuing_processes": f"no job {', '.join(missing)}."})
        upstream = [found[pk] for pk in change.upstream]
    update_process(step.pk, ProcessChanges.of(step, next=nxt, enqueuing=upstream))


def _add_step(job: Process, new: NewStep) -> Process:
    live = _live_steps(job)
    with _said_of(new.name):
        unknown = [name for name in new.after if name not in live]
        if unknown:
            raise ValidationError(
                {"next_processes": f"{', '.join(unknown)}: no such step in {job.name}."}
            )
        kind = ProcessType.objects.filter(pk=new.process_type_id).first()
        if kind is None:
            raise ValidationError({"process_type": f"{new.process_type_id} is not a step type"})
        if new.after:
            before = [live[name] for name in new.after]
        else:  # at the end: after the steps that no step follows
            before = [
                s
                for s in live.values()
                if not s.next_processes.filter(deleted=False, parent=job).exists()
            ]
        step = create_process(
            ProcessChanges(
                name=new.name,
                bus_domain=job.bus_domain,
                process_type=kind,
                parent=job,
                description=new.description,
                max_retries=job.max_retries,
                lease_seconds=job.lease_seconds,
                enqueuing=[],
                next=[],
            )
        )
        set_properties(step, new.properties)
    for predecessor in before:
        with _said_of(predecessor.name):
            update_process(
                predecessor.pk,
                ProcessChanges.of(
                    predecessor, next=[*predecessor.next_processes.filter(deleted=False), step]
                ),
            )
    return step
