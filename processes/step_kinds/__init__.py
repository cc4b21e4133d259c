"""Step kinds: what a kind declares (:class:`StepKind`), the registry of kinds, and the
context a step's body receives.

A step's ``ProcessType.job_kind`` names its kind, and the kind is one module: its
:class:`StepKind` spec and its body, registered by :func:`register` when the module is
imported. The module of kind ``a.b`` is ``processes.step_kinds.a_b`` (its seed migration adds
the ``ProcessType`` row, and the ``LineageQueryType`` row of its ``query_kind``); a kind
defined elsewhere (a test's) is registered by importing its module. Everything that depends
on a kind (the registry's checks, storage locations, lineage, OpenLineage, replay, the queue
a step goes to) reads the spec, and none knows a kind by its name.

A kind's module imports no PySpark when it is imported: the web process checks properties
with the specs and never starts Spark. A Spark kind's body imports what it runs with.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from processes.models import InstanceExec, Process, Property
from processes.steplog import StepLogger

if TYPE_CHECKING:
    from batches.locations import StepLocations
    from lineage.steps import StepLineage

Counters = dict[str, Any]
# A step kind's body: what runs for one step run, given its context; what it counted.
StepBody = Callable[["StepContext"], Counters]
# A step's properties by config group: {group: {key: value}}
PropertyGroups = Mapping[str, Mapping[str, object]]
PACKAGE = __name__


class UnknownKind(LookupError):
    pass


class RefusedProperty(ValueError):
    """A property value a check refuses; the message says what to write. A refusal when a
    step is about to run is its log line ``log_id``."""

    log_id = "property.refused"


@dataclass(frozen=True)
class Prop:
    """A property a kind reads: its default (``{step}`` stands for the step's name; None:
    no default, the step says when it needs one) and what it means."""

    default: str | None = None
    help: str = ""


@dataclass(frozen=True)
class Table:
    """A table a kind reads or writes, named by the property ``group.key``: a whole
    ``db.table``, or (``qualified`` False) a bare name; each is a folder of the team's
    (batches.tables). With ``location``, a folder or a database named as a URI instead."""

    group: str
    key: str
    qualified: bool = True
    location: bool = False


@dataclass(frozen=True)
class StepKind:
    name: str  # the ProcessType.job_kind that selects it
    run: StepBody
    # group -> key -> what the kind reads; the defaults fill in what a step leaves out
    properties: Mapping[str, Mapping[str, Prop]] = field(default_factory=dict)
    writes: tuple[Table, ...] = ()
    reads: tuple[Table, ...] = ()  # what it reads, as its properties name it
    statement: Table | None = None  # the property holding the SQL it runs, if any
    # the properties that name storage, checked against the team's roots (batches.locations)
    locations: StepLocations | None = None
    query_kind: int | None = None  # the LineageQueryType of its runs' lineage (lineage.steps)
    # each raises RefusedProperty (or another of checks.REFUSED) for what it will not run
    checks: tuple[Callable[[PropertyGroups], None], ...] = ()
    spark: bool = False  # runs in the worker's Spark session, on a Spark queue
    # where it writes outside the warehouse's tables, replaced per batch (replay, OpenLineage)
    destinations: Callable[[PropertyGroups], list[str]] | None = None
    # counts the rows it reads (rows_in) and sets aside (bad, duplicates), so that they add
    # up to the rows it writes: an accounting() expectation checks it
    accounts: bool = False

    def defaults(self, group: str, step_name: str) -> dict[str, str]:
        return {
            key: prop.default.replace("{step}", step_name)
            for key, prop in self.properties.get(group, {}).items()
            if prop.default is not None
        }

    def with_defaults(self, properties: PropertyGroups, step_name: str) -> PropertyGroups:
        """A step's properties with its kind's defaults for those it leaves out."""
        groups = set(properties) | set(self.properties)
        return {
            group: {**self.defaults(group, step_name), **properties.get(group, {})}
            for group in groups
        }

    def named(
        self, tables: tuple[Table, ...], properties: PropertyGroups, step_name: str
    ) -> list[str]:
        """What ``tables`` name in a step's properties (or their defaults): ``db.table``
        names and locations; a bare name is not one."""
        properties = self.with_defaults(properties, step_name)
        names = []
        for table in tables:
            value = str(properties.get(table.group, {}).get(table.key) or "")
            if value and table.location:
                names.append(value)
            elif value and table.qualified:
                database, _, name = value.rpartition(".")
                names.append(f"{database or 'default'}.{name}")
        return names

    def written_outside(self, properties: PropertyGroups, step_name: str) -> list[str]:
        if self.destinations is None:
            return []
        return self.destinations(self.with_defaults(properties, step_name))


def check_value(
    group: str, key: str, check: Callable[[str], object], *, skip_empty: bool = True
) -> Callable[[PropertyGroups], None]:
    """A spec's check of one property: ``check`` its value when the step sets one (with
    ``skip_empty``, an empty value counts as none)."""

    def checked(properties: PropertyGroups) -> None:
        value = properties.get(group, {}).get(key)
        if value is not None and (str(value) or not skip_empty):
            check(str(value))

    return checked


_REGISTRY: dict[str, StepKind] = {}


def register(kind: StepKind) -> StepKind:
    _REGISTRY[kind.name] = kind
    return kind


def module_of(name: str) -> str:
    return f"{PACKAGE}.{name.replace('.', '_')}"


def spec_of(name: str) -> StepKind:
    """The kind ``name`` (importing its module on first use), or :class:`UnknownKind`."""
    if name not in _REGISTRY:
        module = module_of(name)
        # A kind's name has a dot (its module an underscore): no helper module is a kind.
        if "." in name and all(part.isidentifier() for part in name.split(".")):
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise  # the kind's module is there; something it imports is not
        if name not in _REGISTRY:
            raise UnknownKind(f"no step kind {name!r} is registered")
    return _REGISTRY[name]


def find(name: str) -> StepKind | None:
    """The kind ``name``, or None (a job's type names none)."""
    try:
        return spec_of(name)
    except UnknownKind:
        return None


def documented(name: str) -> list[tuple[str, str | None, str]]:
    """What the kind ``name`` reads of a step's properties, as ``(group.key, default, help)``
    (none for a name no kind has): what the registration pages show beside a step's kind."""
    kind = find(name)
    if kind is None:
        return []
    return [
        (f"{group}.{key}", prop.default, prop.help)
        for group, keys in kind.properties.items()
        for key, prop in keys.items()
    ]


def get(name: str) -> StepBody:
    return spec_of(name).run


@dataclass
class StepContext:
    step: Process
    job_run_id: int
    step_run_id: int
    target_batch_id: int
    batch_ids: list[int]
    files: list[Any]  # run_inputs.FileInfo of the claimed batches
    options: dict[str, Any] = field(default_factory=dict)  # from the caller (CLI flags, ...)
    outputs: list[str] = field(default_factory=list)  # tables written so far (db.table)
    inputs: list[str] = field(default_factory=list)  # tables and locations read so far
    checks: list[dict[str, Any]] = field(default_factory=list)  # expectations checked so far
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (table, its quarantine)
    # the rows of the partitions it read, as their writers counted them (None: not counted)
    rows_read: list[int | None] = field(default_factory=list)

    @property
    def log(self) -> StepLogger:
        return StepLogger(self.step, self.step_run_id)

    @property
    def kind(self) -> StepKind:
        return spec_of(self.step.process_type.job_kind)

    def properties(self, group: str) -> dict[str, str]:
        """The step's properties of ``group``, its kind's defaults for those it leaves out."""
        stored = Property.objects.filter(process=self.step, config_group=group)
        return {
            **self.kind.defaults(group, self.step.name),
            **dict(stored.values_list("key", "value")),
        }

    def record_input(self, *names: str) -> None:
        """Keep on the run what the step read (``db.table``, a folder's or database's URI),
        as soon as it reads it: a failed step still says what it touched. (An empty name is
        none.)"""
        added = [name for name in names if name and name not in self.inputs]
        if added:
            self.inputs += added
            InstanceExec.objects.filter(pk=self.step_run_id).update(inputs=self.inputs)

    def record_lineage(self, describe: Callable[[], StepLineage]) -> None:
        """The run's column lineage, as ``describe`` says it (:func:`lineage.steps.record_step`,
        as the query type the kind names), never the step's failure."""
        from lineage.steps import record_step

        if self.kind.query_kind is not None:
            record_step(
                self.kind.name,
                self.kind.query_kind,
                process_id=self.step.pk,
                run_id=self.step_run_id,
                describe=describe,
            )

    def mark_batch(self, marking: str) -> None:
        """Mark the run's batch (a marking, batches/markings.py: the days its output holds): the job
        queues it downstream with this marking, and a job that closes days closes the days
        before it (``batch_queue.close_days``)."""
        InstanceExec.objects.filter(pk=self.step_run_id).update(batch_marking=marking)

    def record_checks(self, results: list[dict[str, Any]]) -> None:
        """Keep on the run the expectations checked on a table it writes, as soon as they are
        known: a step that one of them fails still shows them all."""
        self.checks += results
        InstanceExec.objects.filter(pk=self.step_run_id).update(checks=self.checks)

    def record_rows_read(self, table: str, rows: list[int | None]) -> None:
        """The rows of the partitions of ``table`` the step reads, as counted when they were
        written (None for a partition or folder nobody counted): the upstream side of an
        accounting rule (``expectations.audit``)."""
        self.rows_read += rows

    def record_files_written(self, files: list[tuple[str, int]]) -> None:
        """Keep on the run the files it wrote outside the warehouse's tables (path, bytes):
        what an export's run page lists."""
        InstanceExec.objects.filter(pk=self.step_run_id).update(
            files_written=[{"path": path, "bytes": size} for path, size in files]
        )

    def record_output(self, name: str) -> None:
        """Keep on the run a table the step wrote (``db.table``), as soon as it is written."""
        if name not in self.outputs:
            self.outputs.append(name)
            InstanceExec.objects.filter(pk=self.step_run_id).update(outputs=self.outputs)


def run_step(context: StepContext) -> Counters:
    """Run the step's kind and store what it counted on the step's run."""
    kind = context.kind
    with _session_for(kind, context):
        counters = kind.run(context) or {}
    if context.quarantined:
        from lineage.steps import record_quarantines

        record_quarantines(context.step_run_id, context.quarantined)
    InstanceExec.objects.filter(pk=context.step_run_id).update(counters=counters)
    if kind.accounts:
        _account(context, counters)
    return counters


def _account(context: StepContext, counters: Counters) -> None:
    """The step's accounting rules, from what it counted and what it wrote (its partitions'
    rows as counted once written): kept on the run with its other expectations; a failed
    ``fail`` rule fails the step, so that its job publishes nothing of the batch."""
    from batches.models import Partition
    from processes.step_kinds import expectations

    rules = [
        r
        for r in expectations.rules_of(context.properties(expectations.GROUP))
        if r.kind == "accounting"
    ]
    if not rules:
        return
    written: dict[tuple[str, str], int | None] = {
        (database.lower(), name.lower()): rows
        for database, name, rows in Partition.objects.filter(
            step_run_id=context.step_run_id
        ).values_list("table__dbname", "table__table_name", "rows")
    }
    # Tables it wrote with no attempt counted: in place, on a store BDRE does not list.
    uncounted = {
        tuple(name.lower().split(".", 1)) for name in context.outputs if "." in name
    } - set(written)
    known = context.rows_read and None not in context.rows_read
    upstream = sum(r for r in context.rows_read if r is not None) if known else None
    results = [
        expectations.audit(
            r,
            expectations.ledger(
                counters, written, r.table, upstream, uncounted=uncounted, kind=context.kind.name
            ),
        )
        for r in rules
    ]
    context.record_checks(results)
    failing = []
    for result in results:
        if expectations.is_failure(result):
            context.log("expect.failed", expectations.described(result), "quality")
            if result["action"] == "fail":
                failing.append(expectations.described(result))
    if failing:
        raise expectations.ExpectationFailed(
            f"batch {context.target_batch_id} is not published: " + "; ".join(failing)
        )


def _session_for(kind: StepKind, context: StepContext) -> AbstractContextManager[object]:
    """A Spark step runs with its own Spark options on the worker's session; the other
    kinds never import PySpark."""
    if not kind.spark:
        return nullcontext()
    from processes.step_kinds.spark_progress import logged_step_session

    return logged_step_session(context)


def cancel_running_work() -> None:
    """Cancel the Spark jobs of this worker process (a step whose run was terminated). Only
    when this process has a Spark session: it never starts one, nor imports PySpark."""
    session_module = sys.modules.get("processes.step_kinds.spark_session")
    if session_module is not None:
        session_module.cancel_all()
