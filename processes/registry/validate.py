"""Validate a job's SQL before it runs: each statement a step would run, checked against the
schemas of the tables its team may read (``batches.tables.readable_tables``, each with the
columns and types its last write recorded), without Spark and without saving anything.

Every problem is said at once, each with the step and property at fault: a statement the
sandbox refuses (``sql_guard``), a table the team may not read, a column no table of the
query has (with the closest names), a field a struct column does not have, an ambiguous
column. What cannot be checked is said too, never guessed: a table registered but not
written yet (its columns are unknown), one a step of the team will write, a ``*`` over such
a table."""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from batches import tables
from bdre import sql_parse
from bdre.sql_parse import StatementTooDeep, struct_fields
from processes import step_kinds
from processes.models import Process, ProcessType, Property
from processes.registry.pipelines import JobSpec
from processes.step_kinds.sql_guard import DIALECT, RefusedStatement, check_query, render


@dataclass(frozen=True)
class StepSql:
    """A step as the form or the document has it: its name, its kind (the step type's
    ``job_kind``) and its properties."""

    step: str
    kind: str
    properties: Mapping[str, Mapping[str, object]]


@dataclass(frozen=True)
class Problem:
    step: str
    property: str  # group.key
    message: str


@dataclass
class Validation:
    problems: list[Problem] = field(default_factory=list)
    # what was checked and what could not be, in words: one line a statement
    checked: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class _Schemas:
    # db.table (lower case) -> column (lower case) -> Spark type; None: registered or to be
    # written by a step of the team, its columns not known yet
    columns: Mapping[str, Mapping[str, str] | None]
    readable: tuple[str, ...]  # db.table names as registered, for "did you mean"


def validate_sql(team_id: int, steps: Iterable[StepSql]) -> Validation:
    """Each step's statement (a kind's ``statement`` property) checked against the schemas
    of the tables ``team_id`` may read; the tables the team's steps, and these ones, write
    but that hold nothing yet are known by name only."""
    found = Validation()
    steps = list(steps)
    to_check = []
    for step in steps:
        kind = step_kinds.find(step.kind)
        if kind is not None and kind.statement is not None:
            to_check.append((step, kind.statement))
    if not to_check:
        return found
    schemas = _team_schemas(team_id, steps)
    for step, statement in to_check:
        where = f"{statement.group}.{statement.key}"
        query = str(step.properties.get(statement.group, {}).get(statement.key) or "")
        if not query.strip():
            found.problems.append(Problem(step.step, where, "no statement: this kind needs one"))
            continue
        problems, unchecked = _check(query, schemas)
        found.problems += [Problem(step.step, where, message) for message in problems]
        if problems:
            found.checked.append(f"{step.step}: {_count(len(problems), 'problem')}")
        elif unchecked:
            found.checked.append(
                f"{step.step}: the statement reads; not checked: {'; '.join(unchecked)}"
            )
        else:
            found.checked.append(f"{step.step}: every table and column it names exists")
    return found


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _team_schemas(team_id: int, steps: list[StepSql]) -> _Schemas:
    columns: dict[str, Mapping[str, str] | None] = {}
    readable = []
    for table in tables.readable_tables(team_id):
        name = f"{table.dbname}.{table.table_name}"
        readable.append(name)
        known = {column.lower(): kind for column, kind in struct_fields(table.ddl)}
        if known and table.batch_id_partition_col:
            known.setdefault(table.batch_id_partition_col.lower(), "int")
        columns[name.lower()] = known or None
    for name in _written_by_steps(team_id, steps):
        columns.setdefault(name.lower(), None)
    return _Schemas(columns, tuple(sorted(readable)))


def _written_by_steps(team_id: int, steps: list[StepSql]) -> list[str]:
    """The tables the team's registered steps and ``steps`` write (by their properties)."""
    registered = list(
        Process.objects.filter(
            bus_domain__team_id=team_id, parent__isnull=False, deleted=False
        ).values_list("pk", "name", "process_type__job_kind")
    )
    props: dict[int, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for process_id, group, key, value in Property.objects.filter(
        process_id__in=[pk for pk, _, _ in registered]
    ).values_list("process_id", "config_group", "key", "value"):
        props[process_id][group][key] = value
    written = []
    everyone: list[tuple[str, str, Mapping[str, Mapping[str, object]]]] = [
        (name, kind, props[pk]) for pk, name, kind in registered
    ]
    everyone += [(s.step, s.kind, s.properties) for s in steps]
    for name, kind_name, properties in everyone:
        kind = step_kinds.find(kind_name or "")
        if kind is not None:
            written += kind.named(kind.writes, properties, name)
    return written


def _check(query: str, schemas: _Schemas) -> tuple[list[str], list[str]]:
    """The problems of one statement, and what of it could not be checked."""
    try:
        check_query(query)
    except (RefusedStatement, StatementTooDeep) as exc:
        return [str(exc)], []
    try:
        (statement,) = sql_parse.parse(render(query, [1, 2], 3), DIALECT)
    except (SqlglotError, ValueError) as exc:  # the guard reads it; this is a second reading
        return [f"the statement cannot be read: {exc}"], []
    problems: list[str] = []
    unchecked: list[str] = []
    for scope in traverse_scope(statement):
        _check_scope(scope, schemas, problems, unchecked)
    return list(dict.fromkeys(problems)), list(dict.fromkeys(unchecked))


def _source_columns(source: exp.Table | Scope, schemas: _Schemas) -> dict[str, str] | None:
    """A source's columns (name -> type, "" when the type is not known): a table's, as
    registered; a subquery's or a CTE's, its output names. None: not known."""
    if isinstance(source, Scope):
        query = source.expression
        if not isinstance(query, exp.Select) or query.is_star:
            return None
        return {name.lower(): "" for name in query.named_selects}
    name = _table_name(source)
    known = schemas.columns.get(name)
    if known is None:
        return None
    return dict(known)


def _table_name(table: exp.Table) -> str:
    return f"{table.db or 'default'}.{table.name}".lower()


def _closest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word.lower(), list(choices), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _check_scope(
    scope: Scope, schemas: _Schemas, problems: list[str], unchecked: list[str]
) -> None:
    if not isinstance(scope.expression, exp.Select):
        return
    sources: dict[str, dict[str, str] | None] = {}
    for alias, (_, source) in scope.selected_sources.items():
        if isinstance(source, exp.Table):
            name = _table_name(source)
            if name not in schemas.columns:
                problems.append(
                    f"{source.sql(DIALECT)} is not a table your team may read"
                    + _closest(name, (n.lower() for n in schemas.readable))
                )
                sources[alias.lower()] = None
                continue
            if schemas.columns[name] is None:
                unchecked.append(f"the columns of {name} (nothing written to it yet)")
        sources[alias.lower()] = _source_columns(source, schemas)
    aliases = {s.alias_or_name.lower() for s in scope.expression.selects}
    lambdas = {
        var.name.lower() for lam in scope.expression.find_all(exp.Lambda) for var in lam.expressions
    }
    outer = _outer_sources(scope, schemas)
    for column in scope.columns:
        message = _check_column(column, sources, outer, aliases, lambdas)
        if message:
            problems.append(message)


def _outer_sources(scope: Scope, schemas: _Schemas) -> dict[str, dict[str, str] | None]:
    """What a correlated subquery may name of the queries around it."""
    found: dict[str, dict[str, str] | None] = {}
    parent = scope.parent
    while parent is not None:
        for alias, (_, source) in parent.selected_sources.items():
            found.setdefault(alias.lower(), _source_columns(source, schemas))
        parent = parent.parent
    return found


def _check_column(
    column: exp.Column,
    sources: dict[str, dict[str, str] | None],
    outer: dict[str, dict[str, str] | None],
    aliases: set[str],
    lambdas: set[str],
) -> str | None:
    if column.is_star:
        return None  # t.*: its table was checked with the sources
    parts = [p.name.lower() for p in column.parts]
    if len(parts) == 1:
        return _check_bare(parts[0], sources, outer, aliases, lambdas)
    everywhere = {**outer, **sources}
    qualifier, name, path = parts[0], parts[1], parts[2:]
    if qualifier in everywhere:
        columns = everywhere[qualifier]
        if columns is None:
            return None
        if name not in columns:
            return f"{qualifier}.{name} is not a column of {qualifier}" + _closest(name, columns)
        return _check_fields(f"{qualifier}.{name}", columns[name], path)
    # Not a table: a struct column's field (``contexts.page.url``), as Spark reads it.
    return _check_bare(qualifier, sources, outer, aliases, lambdas, path=parts[1:])


def _check_bare(
    name: str,
    sources: dict[str, dict[str, str] | None],
    outer: dict[str, dict[str, str] | None],
    aliases: set[str],
    lambdas: set[str],
    path: list[str] | None = None,
) -> str | None:
    if name in lambdas or (not path and name in aliases):
        return None
    for level in (sources, outer):
        if any(columns is None for columns in level.values()):
            return None  # a source whose columns are not known might have it
        having = [alias for alias, columns in level.items() if columns and name in columns]
        if len(having) > 1:
            return f"{name} is ambiguous: a column of {', '.join(sorted(having))}; name its table"
        if having:
            return _check_fields(name, level[having[0]][name], path or [])  # type: ignore[index]
    known = {c for columns in sources.values() if columns for c in columns}
    tables = ", ".join(sorted(sources)) or "no table"
    return f"{name} is not a column of {tables}" + _closest(name, known | aliases)


def _check_fields(shown: str, kind: str, path: list[str]) -> str | None:
    """A struct column's fields along ``path``, by its registered type."""
    for part in path:
        kind = kind.strip()
        if not kind.startswith("struct<"):
            return None  # a map's key, an array's element: Spark's to say, not a schema's
        fields = {name.lower(): inner for name, inner in struct_fields(kind)}
        if part not in fields:
            return f"{shown} has no field {part}" + _closest(part, fields)
        shown, kind = f"{shown}.{part}", fields[part]
    return None


def validate_spec(spec: JobSpec) -> Validation:
    """:func:`validate_sql` of a job as the API's pipeline document has it."""
    kinds = dict(
        ProcessType.objects.filter(
            pk__in=[step.process_type_id for step in spec.steps]
        ).values_list("pk", "job_kind")
    )
    return validate_sql(
        spec.bus_domain.team_id,
        [
            StepSql(step.name, kinds.get(step.process_type_id) or "", step.properties)
            for step in spec.steps
        ],
    )
