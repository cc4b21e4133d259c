"""The Spark SQL sandbox of ``spark.sql`` steps (docs/sql.md, docs/security.md): a statement
runs only if it is one query that reads registered tables with what the allowlist allows.

A developer of one team writes the statement, and the worker that runs it can read every
team's files and the installation's settings; Spark SQL has hundreds of functions, some of
which read files, fetch URLs or call Java methods, and clauses that run programs
(``TRANSFORM ... USING``) or read any path (``text.`file:///etc/passwd```). So the check is
an allowlist, never a list of what someone thought of: :func:`check_statement` accepts a
statement only if every node of its tree is of a kind in :data:`ALLOWED_NODES` and every
function it calls is in ``sql_functions.ALLOWED`` with its argument rule kept; anything else
is refused by name. It runs at registration (``processes.step_kinds.checks``: a 400 on the
property) and again when the step runs (``processes.step_kinds.spark_sql``: the run fails with the
reason), since a property can change behind the registry's back.

The statement checked is the statement Spark runs: ``${`` is refused (Spark's variable
substitution is also off in the sandbox's session, ``spark_session.SANDBOX_CONF``), since
Spark would put text there (the environment, settings) or take text away (``${x/*}`` hid a
call from this check behind what sqlglot read as a comment).

sqlglot does the parsing, not Spark's parser: registration happens in the web process, which
never starts a JVM, and one parser in both places gives one answer. The check fails closed (a
statement sqlglot cannot parse, or anything but a query, is refused), and layers stand behind
it when the step runs: Spark's own grammar must read the statement as a query
(``spark_sql.check_with_spark``), and the session is built with the settings that disable
path-based sources, script transforms, reflection and variable substitution
(``processes.step_kinds.spark_session``).
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import SqlglotError

from bdre import sql_parse
from processes.step_kinds import RefusedProperty
from processes.step_kinds.sql_functions import ALLOWED, HINTS, REFUSED, Options

DIALECT = "spark"
ASK = "not in the allowed functions (docs/sql.md); ask your installation's admin"

# ``format.`path``` names a data source, not a database: every built-in and common one. This
# list only gives the clearer message: _check_table's plain-name rule and the session's
# runSQLOnFiles=false are what close path reads, whatever the source's name.
DATA_SOURCES = frozenset(
    {
        "avro",
        "binaryfile",
        "console",
        "csv",
        "delta",
        "hive",
        "hudi",
        "iceberg",
        "image",
        "jdbc",
        "json",
        "kafka",
        "libsvm",
        "noop",
        "orc",
        "parquet",
        "protobuf",
        "rate",
        "socket",
        "text",
        "textfile",
        "xml",
    }
)
# Registered tables and CTEs are plain names; anything else (a path, a class name, a URI) is
# not a table of the team.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+\Z")

# The kinds of node a read-only analytic query is made of; a function call (exp.Func) is
# checked by its name instead. Anything else (DDL, DML, SET, commands, TRANSFORM, parameters,
# properties) is refused, named.
ALLOWED_NODES: frozenset[type[exp.Expr]] = frozenset(
    {
        # queries, set operations, CTEs, subqueries
        exp.Select,
        exp.Union,
        exp.Intersect,
        exp.Except,
        exp.With,
        exp.CTE,
        exp.Subquery,
        exp.Exists,
        exp.From,
        exp.Join,
        exp.Lateral,
        exp.Values,
        exp.Table,
        exp.TableAlias,
        exp.TableSample,
        exp.Pivot,
        exp.PivotAlias,
        exp.UnpivotColumns,
        exp.Where,
        exp.Group,
        exp.Cube,
        exp.Rollup,
        exp.GroupingSets,
        exp.Having,
        exp.Qualify,
        exp.Order,
        exp.Ordered,
        exp.Sort,
        exp.Cluster,
        exp.Distribute,
        exp.Limit,
        exp.Offset,
        exp.Distinct,
        exp.Window,
        exp.WindowSpec,
        exp.Hint,
        # names and values
        exp.Alias,
        exp.Aliases,
        exp.Column,
        exp.Identifier,
        exp.Star,
        exp.Literal,
        exp.Null,
        exp.Boolean,
        exp.HexString,
        exp.National,
        exp.ByteString,
        exp.RawString,
        exp.Interval,
        exp.IntervalSpan,
        exp.Var,
        exp.DataType,
        exp.DataTypeParam,
        exp.ColumnDef,
        exp.Tuple,
        exp.Paren,
        exp.Bracket,
        exp.Dot,
        exp.Lambda,
        exp.PropertyEQ,
        exp.Kwarg,
        exp.Slice,
        # operators
        exp.Neg,
        exp.Not,
        exp.And,
        exp.Or,
        exp.Xor,
        exp.Add,
        exp.Sub,
        exp.Mul,
        exp.Div,
        exp.Mod,
        exp.IntDiv,
        exp.EQ,
        exp.NEQ,
        exp.GT,
        exp.GTE,
        exp.LT,
        exp.LTE,
        exp.NullSafeEQ,
        exp.NullSafeNEQ,
        exp.Is,
        exp.In,
        exp.Between,
        exp.Like,
        exp.ILike,
        exp.Escape,
        exp.DPipe,
        exp.BitwiseAnd,
        exp.BitwiseOr,
        exp.BitwiseXor,
        exp.BitwiseNot,
        exp.BitwiseLeftShift,
        exp.BitwiseRightShift,
        exp.Collate,
        # aggregate and window modifiers
        exp.Filter,
        exp.WithinGroup,
        exp.IgnoreNulls,
        exp.RespectNulls,
        exp.When,
        exp.Whens,
        exp.Any,
        # from_utc_timestamp, to_utc_timestamp as sqlglot reads them
        exp.AtTimeZone,
        exp.FromTimeZone,
        # the path of get_json_object as sqlglot reads it: to Spark, a string
        exp.JSONPath,
        *exp.JSONPathPart.__subclasses__(),
    }
)
# Names Spark reads as syntax, not as a function of its registry.
SYNTAX_FUNCTIONS = frozenset({"cast", "try_cast", "extract", "case", "if", "struct"})

# Statements and clauses with no place inside the step's query, with the reason a refusal
# gives; the allowlist refuses them anyway, this only says why.
NODE_REASONS: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.QueryTransform, "script transforms (TRANSFORM ... USING) run programs on the worker"),
    (exp.LocationProperty, "LOCATION names storage outside the step's output"),
    (exp.UsingProperty, "CREATE FUNCTION ... USING JAR loads code from a jar"),
    (exp.Set, "SET of settings can lift the sandbox"),
    (exp.Command, "only a single SELECT query may run"),
    (exp.DDL, "DDL and DML are not allowed: the step writes its output table itself"),
    (exp.DML, "DDL and DML are not allowed: the step writes its output table itself"),
    (exp.Parameter, "parameters and variables (${...}, :name) are not allowed"),
    (exp.Placeholder, "parameters and variables (${...}, :name, ?) are not allowed"),
)
FIRST_WORDS = {
    "SET": "SET of settings can lift the sandbox",
    "RESET": "RESET of settings can lift the sandbox",
    "ADD": "ADD JAR/FILE/ARCHIVE loads code or files onto the worker",
    "LIST": "only a single SELECT query may run",
}
# Spark's lexer carries a ``--`` comment over a backslash at the end of its line
# (SqlBaseLexer.g4, SIMPLE_COMMENT); sqlglot ends the comment there. The next line would be
# code to Spark and comment to the guard, or the other way round.
CONTINUED_LINE = re.compile(r"\\[\r\n]")
CONTINUED = (
    "a backslash at the end of a line is not allowed: Spark continues a -- comment over it, "
    "so it would run another statement than the one checked; remove the backslash"
)
SUBSTITUTION = (
    "${ is not allowed in a statement: Spark would replace ${...} with a variable, the "
    "environment or a setting, or with nothing, and run another statement than the one "
    "checked; write the value itself"
)
# A refused function written as a call anywhere in the text, whatever sqlglot makes of it (a
# typed node of another name, a string it misreads): a comment or backticks may stand between
# the name and its parenthesis.
REFUSED_CALL = re.compile(
    r"(?<![A-Za-z0-9_$])("
    + "|".join(sorted((n for n in REFUSED if n.isidentifier()), key=len, reverse=True))
    + r")(?![A-Za-z0-9_$])(?:[\s`]|/\*.*?\*/|--[^\n]*\n)*\(",
    re.IGNORECASE | re.DOTALL,
)
SPARK_NAME = re.compile(r"\s*`?([A-Za-z_][A-Za-z0-9_]*)")


class RefusedStatement(RefusedProperty):
    """A statement the sandbox does not run; the message says why."""

    log_id = "sql.refused"

    def __init__(self, reason: str):
        super().__init__(f"Spark SQL refused: {reason}")
        self.reason = reason


def render(query: str, batch_ids: list[int], target_batch_id: int) -> str:
    """The statement as it runs: the placeholders replaced by the run's batch ids."""
    return query.replace("{batch_ids}", ", ".join(str(b) for b in batch_ids)).replace(
        "{target_batch_id}", str(target_batch_id)
    )


def check_query(query: str) -> None:
    """:func:`check_statement` of a ``sql.query`` property as registered, its placeholders
    rendered with sample ids (the ids are numbers, so they cannot change what is refused)."""
    check_statement(render(query, [1, 2], 3))


def check_statement(sql: str) -> None:
    """Raise :class:`RefusedStatement` unless ``sql`` is one query (SELECT, WITH ... SELECT,
    set operations of them) over plain table names made only of allowed nodes and functions
    (docs/sql.md); :class:`~bdre.sql_parse.StatementTooDeep` for one nested too deeply."""
    if "${" in sql:
        raise RefusedStatement(SUBSTITUTION)
    if CONTINUED_LINE.search(sql):
        raise RefusedStatement(CONTINUED)
    try:
        _check_parsed(sql)
    except RecursionError:
        # A form of nesting sql_parse does not count, met by a recursive walk or rendering.
        raise sql_parse.StatementTooDeep() from None


def _check_parsed(sql: str) -> None:
    first = sql.lstrip(" \t\r\n(").split(None, 1)
    if first and first[0].upper().rstrip(";") in FIRST_WORDS:
        raise RefusedStatement(FIRST_WORDS[first[0].upper().rstrip(";")])
    called = REFUSED_CALL.search(sql)
    if called:
        name = called.group(1).lower()
        raise RefusedStatement(f"function {name} is not allowed: {REFUSED[name]}")
    try:
        statements = sql_parse.parse(sql, DIALECT)
    except SqlglotError as exc:
        reason = str(exc).splitlines()[0]
        raise RefusedStatement(f"the statement cannot be parsed ({reason})") from exc
    if len(statements) != 1:
        raise RefusedStatement(f"one statement may run, not {len(statements)}")
    (tree,) = statements
    # Hints' arguments are names and numbers Spark never evaluates (the hint itself is
    # checked by _check_hint below), so their insides are not walked as expressions.
    nodes = list(tree.walk(prune=lambda node: isinstance(node, exp.Hint)))
    # The most specific reason first: a CTAS with LOCATION is refused for its LOCATION.
    for kind, reason in NODE_REASONS:
        if any(isinstance(node, kind) for node in nodes):
            raise RefusedStatement(reason)
    if not isinstance(tree, exp.Query):
        raise RefusedStatement(
            f"only a single SELECT query may run, not {tree.key.upper()}: "
            "the step writes its output table itself"
        )
    for node in nodes:
        # Operators are exp.Func too in sqlglot (And, Or): the kinds of node first.
        if type(node) not in ALLOWED_NODES:
            if not isinstance(node, exp.Func):
                raise RefusedStatement(
                    f"{_shown(node)} is not allowed in a step's query (docs/sql.md): only a "
                    "read-only query over registered tables may run"
                )
            _check_function(node)
        elif isinstance(node, exp.Table):
            _check_table(node)
        elif isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
            raise RefusedStatement(
                f"function {node.sql(DIALECT)[:80]} is called by a qualified name: write "
                f"{spark_name(node.expression)}(...) alone"
            )
        elif isinstance(node, exp.Hint):
            _check_hint(node)


def spark_name(func: exp.Func) -> str:
    """The name Spark resolves for the call ``func``: as written for a call sqlglot does not
    know (exp.Anonymous). sqlglot reads a call it knows into a node of its own, whose names
    differ from Spark's (``nvl`` and ``ifnull`` are its Coalesce) and which keeps no written
    name: an allowed one of the node's own names, or of the call sqlglot writes for Spark
    (``coalesce``), else the node's first name. A refused name written as a call is refused
    on the text before (:data:`REFUSED_CALL`), whatever node it became."""
    if isinstance(func, exp.Anonymous):
        return func.name.lower()
    names = [name.lower() for name in func.sql_names()]
    allowed = [name for name in names if name in ALLOWED or name in SYNTAX_FUNCTIONS]
    if not allowed:  # the node's SQL only when needed: it writes the whole subtree
        match = SPARK_NAME.match(func.sql(DIALECT))
        if match:
            names.append(match.group(1).lower())
            allowed = [name for name in names[-1:] if name in ALLOWED]
    return (allowed or names or [func.key])[0]


def _check_function(func: exp.Func) -> None:
    name = spark_name(func)
    if name in REFUSED:
        raise RefusedStatement(f"function {name} is not allowed: {REFUSED[name]}")
    if name not in ALLOWED and name not in SYNTAX_FUNCTIONS:
        raise RefusedStatement(f"function {name} is {ASK}")
    rule = ALLOWED.get(name)
    if isinstance(rule, Options):
        _check_options(name, rule, _arguments(func))


def _arguments(func: exp.Func) -> list[exp.Expr]:
    """The call's arguments in the order they are written."""
    if isinstance(func, exp.Anonymous):
        return list(func.expressions)
    found: list[exp.Expr] = []
    for key in func.arg_types:
        value = func.args.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, exp.Expr):
                found.append(item)
    return found


def _check_options(name: str, rule: Options, arguments: list[exp.Expr]) -> None:
    """The arguments after the data: a literal (a DDL schema), a ``schema_of_*`` call, or a
    ``map(...)`` of listed keys to literal values (sql_functions.Options)."""
    allowed = {key.lower(): key for key in rule.keys}
    refused = {key.lower(): reason for key, reason in rule.refused.items()}
    for argument in arguments[1:]:
        if isinstance(argument, exp.Literal):
            continue
        if isinstance(argument, exp.Func) and spark_name(argument).startswith("schema_of_"):
            continue
        pairs = _literal_map(argument)
        if pairs is None:
            raise RefusedStatement(
                f"{name}: its schema must be a literal string and its options a "
                "map('key', 'value', ...) of literals, not "
                f"{argument.sql(DIALECT)[:80]}"
            )
        for key, value in pairs:
            if not isinstance(key, exp.Literal) or not key.is_string:
                raise RefusedStatement(f"{name}: an option's key must be a literal string")
            if not isinstance(value, (exp.Literal, exp.Boolean)):
                raise RefusedStatement(
                    f"{name}: option {key.this} must have a literal value, not "
                    f"{value.sql(DIALECT)[:80]}"
                )
            if key.this.lower() in refused:
                raise RefusedStatement(
                    f"{name}: option {key.this} is not allowed: {refused[key.this.lower()]}"
                )
            if key.this.lower() not in allowed:
                raise RefusedStatement(
                    f"{name}: option {key.this} is not in the allowed options of {name} "
                    "(docs/sql.md); ask your installation's admin"
                )


def _literal_map(argument: exp.Expr) -> list[tuple[exp.Expr, exp.Expr]] | None:
    """The key-value pairs of ``map(k1, v1, ...)``, None for anything else."""
    if isinstance(argument, exp.VarMap):
        keys, values = argument.args.get("keys"), argument.args.get("values")
        if isinstance(keys, exp.Array) and isinstance(values, exp.Array):
            return list(zip(keys.expressions, values.expressions, strict=True))
        return None
    if isinstance(argument, exp.Anonymous) and argument.name.lower() == "map":
        items = list(argument.expressions)
        if len(items) % 2 == 0:
            return list(zip(items[::2], items[1::2], strict=True))
    return None


def _check_hint(hint: exp.Hint) -> None:
    for item in hint.expressions:
        name = item.name if isinstance(item, (exp.JoinHint, exp.Anonymous)) else item.sql(DIALECT)
        if name.lower() not in HINTS:
            raise RefusedStatement(f"hint {name} is not one of Spark's join and partition hints")


def _shown(node: exp.Expr) -> str:
    """A node named as a developer would know it: its SQL, or its kind."""
    text = node.sql(DIALECT).split("\n")[0]
    return f"{node.key.upper()} ({text[:60]})" if text else node.key.upper()


def _check_table(table: exp.Table) -> None:
    if not isinstance(table.this, exp.Identifier):
        return  # a table function, checked as a function
    parts = [p for p in (table.catalog, table.db, table.name) if p]
    shown = ".".join(f"`{p}`" for p in parts)
    if table.db.lower() in DATA_SOURCES or any(not PLAIN_NAME.match(p) for p in parts):
        raise RefusedStatement(
            f"{shown} reads files by path (format.`path`); read registered tables by name"
        )
