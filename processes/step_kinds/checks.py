"""The checks of a step's properties, for the registry to run when they are registered
(docs/security.md) and for the orchestrator before each run: what every step is checked for
(its Spark options and queue, the tables it writes, the storage it names), and what its kind
checks itself (its spec's ``checks``). Nothing here knows a kind by its name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from batches.locations import LocationRefused, Outside, TeamStorage, storages
from batches.tables import TableNotWritable, check_name, split_name
from processes.models import Process, ProcessType, Property, grouped_properties
from processes.step_kinds import (
    PropertyGroups,
    RefusedProperty,
    StepContext,
    StepKind,
    expectations,
    find,
)
from processes.step_kinds.spark_conf import RefusedSparkOption, check_spark_queue, step_options

# What a step's properties can be refused with (a kind's own checks raise RefusedProperty).
REFUSED = (RefusedProperty, TableNotWritable, LocationRefused, RefusedSparkOption)


def check_step_properties(kind: str, properties: PropertyGroups, *, team_id: int) -> None:
    """Raise one of :data:`REFUSED` for a property that a step of ``kind`` of team
    ``team_id`` would refuse to run: a Spark option a step may not set (spark_conf), a
    table it writes whose name is no plain identifier (``../../etc.x``), a location outside
    the team's storage roots (batches.locations), or what the kind's own checks refuse (a
    ``sql.query`` outside the sandbox, a ``callable.path`` outside ``BDRE_CALLABLES``)."""
    spec = find(kind)
    _check_spark(kind, spec, properties)
    if spec is None:
        return
    if spec.locations is not None:
        spec.locations.refuse_outside(TeamStorage(team_id), properties)
    for check in _checks_of(spec):
        check(properties)
    for table in spec.writes:
        value = properties.get(table.group, {}).get(table.key)
        if value:
            check_name(*split_name(str(value)) if table.qualified else (str(value), "t"))


def _checks_of(spec: StepKind) -> list[Callable[[PropertyGroups], None]]:
    """The kind's own checks; and the expectations of a Spark kind that writes tables (any
    other kind, an export say, has none: an ``expect`` group on it is refused)."""
    if not (spec.spark and spec.writes):
        return [*spec.checks, _no_expectations]
    return [*spec.checks, partial(expectations.check, accounts=spec.accounts)]


def _no_expectations(properties: PropertyGroups) -> None:
    if properties.get(expectations.GROUP):
        raise expectations.RefusedExpectation(
            "expect: expectations are checked on the tables a Spark step writes; this step "
            "writes none"
        )


def _check_spark(kind: str, spec: StepKind | None, properties: PropertyGroups) -> None:
    spark = spec is not None and spec.spark
    step_options(kind, properties, spark=spark)
    check_spark_queue(kind, properties, spark=spark)


def check_step_run(context: StepContext) -> None:
    """Before a step runs: its Spark options, its kind's checks and its locations once more,
    as they are now (a row changed behind the registry's back, a grant taken back since),
    and every file it was given to read; each must lie inside the team's storage roots. A
    refusal fails the step, said in its log (the refusal's ``log_id``). (A kind checks what
    only its body knows, a statement rendered with its batches, a table it writes, itself.)"""
    step = context.step
    storage = TeamStorage(step.bus_domain.team_id)
    kind = step.process_type.job_kind
    spec = context.kind
    properties = grouped_properties(Property.objects.filter(process=step))
    try:
        _check_spark(kind, spec, properties)
    except RefusedSparkOption as exc:
        context.log("spark.refused", str(exc), "security")
        raise
    try:
        for check in _checks_of(spec):
            check(properties)
    except RefusedProperty as exc:
        context.log(exc.log_id, str(exc), "security")
        raise
    try:
        if spec.locations is not None:
            spec.locations.refuse_outside(storage, properties)
        for file in context.files:
            storage.check(file.path, server=storage.server_of_file(file.path, file.server_id))
    except LocationRefused as exc:
        context.log("location.refused", str(exc), "security")
        raise


def steps_outside() -> Iterator[Outside]:
    """The steps whose properties name storage outside their team's roots (a grant taken
    back, a root moved since they were registered), for check_locations."""
    storage_of = storages()
    kinds = set(ProcessType.objects.exclude(job_kind="").values_list("job_kind", flat=True))
    located = {
        kind: spec.locations
        for kind in kinds
        if (spec := find(kind)) is not None and spec.locations is not None
    }
    steps = Process.objects.filter(process_type__job_kind__in=located, deleted=False)
    steps = steps.select_related("bus_domain", "process_type").prefetch_related("properties")
    for step in steps.order_by("pk"):
        locations = located[step.process_type.job_kind]
        properties = grouped_properties(step.properties.all())
        team_id = step.bus_domain.team_id
        try:
            locations.refuse_outside(storage_of(team_id), properties)
        except LocationRefused as exc:
            yield Outside("step", step.pk, team_id, locations.named(properties), str(exc))
