"""Properties of jobs, steps and templates: the limits of their groups and keys, and what a
step's kind refuses to run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import CharField

from bdre.sql_parse import StatementTooDeep
from processes import days
from processes.models import SCHEDULE_GROUP, Process, Property
from processes.step_kinds import checks

Properties = Mapping[str, Mapping[str, str]]  # config_group -> key -> value


def _max_length(name: str) -> int:
    field = Property._meta.get_field(name)
    assert isinstance(field, CharField) and field.max_length is not None  # both have one
    return field.max_length


GROUP_LENGTH = _max_length("config_group")
KEY_LENGTH = _max_length("key")


# Config groups that another app reads (``alerts``: where and when to alert), checked by that
# app: it registers its check here when it starts, so that processes never imports it. A
# check raises processes.step_kinds.RefusedProperty, said in the user's words.
GROUP_CHECKS: dict[str, Callable[[Mapping[str, object]], None]] = {}


def check_properties(properties: Properties, owner: str, field: str | None = "properties") -> None:
    """A ValidationError on ``field`` for a group or key longer than its column, which
    PostgreSQL would refuse at the insert (and SQLite keep); ``field`` None: on the
    property's own field, ``config_group`` or ``key``. The ``schedule`` group is the
    schedule's (its upstream trigger, its pause): set through the schedule's own service."""
    if SCHEDULE_GROUP in properties:
        raise ValidationError(
            {
                field or "config_group": f"{owner}: the {SCHEDULE_GROUP} group is the job's "
                "schedule: set it with the schedule (PUT .../schedule/, pause, resume, or the "
                "job page's schedule section), not as properties"
            }
        )
    if days.GROUP in properties:
        try:
            days.check(dict(properties[days.GROUP]))
        except days.RefusedDayClose as exc:
            raise ValidationError({field or "value": f"{owner}: {exc}"}) from exc
    for group, values in properties.items():
        names = [("config_group", "config group", group, GROUP_LENGTH)]
        names += [("key", "key", key, KEY_LENGTH) for key in values]
        for name, what, text, limit in names:
            if len(text) > limit:
                raise ValidationError(
                    {
                        field or name: f"{owner}: a {what} has at most {limit} characters; "
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
        for group, check in GROUP_CHECKS.items():
            if group in properties:
                check(properties[group])
    # StatementTooDeep: a statement nested too deeply for the parser that checks it, said
    # as any refusal (one message wherever the statement comes in), never a 500.
    except (*checks.REFUSED, StatementTooDeep) as exc:
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


@dataclass(frozen=True)
class PropertySpec:
    """One property of a process, as the properties API writes it row by row."""

    process: Process
    config_group: str
    key: str
    value: str = ""
    description: str = ""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> PropertySpec:
        """From a form's or a serializer's data (blank fields may be left out or None)."""
        return cls(
            process=data["process"],
            config_group=data["config_group"],
            key=data["key"],
            value=data.get("value") or "",
            description=data.get("description") or "",
        )


def check_property(spec: PropertySpec) -> None:
    """What :func:`save_property` refuses, for a form to say before it saves."""
    properties = {spec.config_group: {spec.key: spec.value}}
    check_properties(properties, spec.process.name, field=None)
    check_step_properties(
        spec.process.process_type.job_kind,
        properties,
        spec.process.name,
        field="value",
        team_id=spec.process.bus_domain.team_id,
    )


def save_property(spec: PropertySpec, property_id: int | None = None) -> Property:
    """Create one property, or change ``property_id`` into ``spec``: checked as a property
    that comes with its job is (its group and key, and what the step kind will run), so
    that a property alone is no way around those checks. A ValidationError on
    ``config_group``, ``key`` or ``value``."""
    check_property(spec)
    with transaction.atomic():
        row = (
            Property.objects.select_for_update().get(pk=property_id)
            if property_id is not None
            else Property()
        )
        row.process = spec.process
        row.config_group = spec.config_group
        row.key = spec.key
        row.value = spec.value
        row.description = spec.description
        row.save()
    return row


def replace_properties(process: Process, properties: Properties) -> None:
    """The process's properties become exactly ``properties`` (checked as
    :func:`set_properties` checks them): the keys left out are deleted, but for the
    ``schedule`` group's, which are the schedule's (``processes.schedules``: its upstream
    trigger and its pause), not a property a page or a request writes whole."""
    set_properties(process, properties)
    kept = {(group, key) for group, values in properties.items() for key in values}
    left_out = [
        pk
        for pk, group, key in process.properties.values_list("pk", "config_group", "key")
        if (group, key) not in kept and group != SCHEDULE_GROUP
    ]
    Property.objects.filter(pk__in=left_out).delete()
