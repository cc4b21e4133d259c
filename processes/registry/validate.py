"""Validate a job's SQL before it runs: each statement a step would run, checked against the
schemas of the tables its team may read (``batches.tables.readable_tables``, each with the
columns and types its last write recorded), without Spark and without saving anything.

Every problem is said at once, each with the step and property at fault: a statement the
sandbox refuses (``sql_guard``), a table the team may not read, a column no table of the
query has (with the closest names), a field a struct column does not have, an ambiguous
column. What cannot be checked is said too, never guessed: a table registered but not
written yet, or one a step of the team will write, has no known columns, and a column one
of them might hold is never called wrong."""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import Scope, traverse_scope

from batches import tables
from bdre import sql_parse
from bdre.sql_parse import StatementTooDeep
from lineage.extract import struct_columns
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
        known = struct_columns(table.ddl)
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
    problems: list[str] = []
    unchecked: list[str] = []
    try:
        (statement,) = sql_parse.parse(render(query, [1, 2], 3), DIALECT)
        # Spark reads unquoted names without regard to case: so does the check.
        statement = normalize_identifiers(statement, dialect=DIALECT)
        for scope in traverse_scope(statement):
            _check_scope(scope, schemas, problems, unchecked)
    except (SqlglotError, ValueError, RecursionError) as exc:
        # the guard read it; what this second reading cannot follow (two sources of one
        # name, say) is said, not guessed past
        return [f"the statement cannot be checked: {exc}"], []
    return list(dict.fromkeys(problems)), list(dict.fromkeys(unchecked))


def _source_columns(source: exp.Table | Scope, schemas: _Schemas) -> dict[str, str] | None:
    """A source's columns (name -> type, "" when the type is not known): a table's, as
    registered; a subquery's or a CTE's, its column list or its output names. None: not
    known."""
    if isinstance(source, Scope):
        if source.outer_columns:
            return {name.lower(): "" for name in source.outer_columns}
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


def _named_sources(select: exp.Expr) -> list[str]:
    """The aliases the query's FROM and JOINs give (semi and anti joins too), in order."""
    clauses = [select.args.get("from_"), *(select.args.get("joins") or [])]
    return [c.this.alias_or_name for c in clauses if c is not None]


def _from_sources(scope: Scope) -> dict[str, exp.Table | Scope]:
    """The sources the query's FROM and JOINs name, by alias."""
    found: dict[str, exp.Table | Scope] = {}
    for alias in _named_sources(scope.expression):
        if alias in scope.sources:
            found[alias] = scope.sources[alias]
    return found


def _check_scope(
    scope: Scope, schemas: _Schemas, problems: list[str], unchecked: list[str]
) -> None:
    select = scope.expression
    if not isinstance(select, exp.Select):
        return
    sources: dict[str, dict[str, str] | None] = {}
    aliases = [alias.lower() for alias in _named_sources(select)]
    for twice in sorted({a for a in aliases if aliases.count(a) > 1}):
        problems.append(f"{twice} names two sources of the query: give each its own alias")
    for alias, source in _from_sources(scope).items():
        if isinstance(source, exp.Table):
            if not isinstance(source.this, exp.Identifier):
                sources[alias.lower()] = None  # a table function (range(10)): no table
                continue
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
    if select.args.get("laterals"):  # LATERAL VIEW explode(...): columns of its own
        sources["lateral view"] = None
    shared = {  # JOIN ... USING (k): one column k, not two
        name.name.lower()
        for join in select.args.get("joins") or []
        for name in join.args.get("using") or []
    }
    outputs = {s.alias_or_name.lower() for s in select.selects}
    lambdas = {var.name.lower() for lam in select.find_all(exp.Lambda) for var in lam.expressions}
    outer = _outer_sources(scope, schemas) if scope.is_subquery else {}
    for column in scope.columns:
        if column.find_ancestor(exp.Select) is not select:
            continue  # a subquery's own column, checked in its scope
        message = _check_column(column, sources, outer, outputs | shared, lambdas)
        if message:
            problems.append(message)


def _outer_sources(scope: Scope, schemas: _Schemas) -> dict[str, dict[str, str] | None]:
    """What a correlated subquery may name of the queries around it."""
    found: dict[str, dict[str, str] | None] = {}
    parent = scope.parent
    while parent is not None:
        if isinstance(parent.expression, exp.Select):
            for alias, source in _from_sources(parent).items():
                found.setdefault(alias.lower(), _source_columns(source, schemas))
        parent = parent.parent
    return found


def _check_column(
    column: exp.Column,
    sources: dict[str, dict[str, str] | None],
    outer: dict[str, dict[str, str] | None],
    names: set[str],
    lambdas: set[str],
) -> str | None:
    """``names``: the query's output names and the join's shared columns, which Spark reads
    as columns too."""
    if column.is_star:
        return None  # t.*: its table was checked with the sources
    parts = [p.name.lower() for p in column.parts]
    if len(parts) == 1:
        return _check_bare(parts[0], sources, outer, names, lambdas)
    everywhere = {**outer, **sources}
    if len(parts) >= 3 and parts[1] in everywhere:  # db.table.column
        parts = parts[1:]
    qualifier, name, path = parts[0], parts[1], parts[2:]
    if qualifier in everywhere:
        columns = everywhere[qualifier]
        if columns is None:
            return None
        if name not in columns:
            return f"{qualifier}.{name} is not a column of {qualifier}" + _closest(name, columns)
        return _check_fields(f"{qualifier}.{name}", columns[name], path)
    # Not a table: a struct column's field (``contexts.page.url``), as Spark reads it.
    return _check_bare(qualifier, sources, outer, names, lambdas, path=parts[1:])


def _check_bare(
    name: str,
    sources: dict[str, dict[str, str] | None],
    outer: dict[str, dict[str, str] | None],
    names: set[str],
    lambdas: set[str],
    path: list[str] | None = None,
) -> str | None:
    if name in lambdas or name in names:
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
    return f"{name} is not a column of {tables}" + _closest(name, known | names)


def _check_fields(shown: str, kind: str, path: list[str]) -> str | None:
    """A struct column's fields along ``path``, by its registered type."""
    for part in path:
        kind = kind.strip()
        if not kind.startswith("struct<"):
            return None  # a map's key, an array's element: Spark's to say, not a schema's
        fields = struct_columns(kind)
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
