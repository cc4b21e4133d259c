"""The Spark SQL sandbox of ``spark.sql`` steps (docs/security.md): a statement runs only if it
is one query that reads registered tables.

A developer of one team writes the statement, and the worker that runs it can read every
team's files and the installation's settings; Spark SQL can run programs
(``TRANSFORM ... USING``), read any path (``text.`file:///etc/passwd```), load jars and call
Java methods. :func:`check_statement` refuses all of that before the statement reaches Spark,
at registration (``processes.registry``: a 400 on the property) and again when the step runs
(``processes.jobs.spark_sql``: the run fails with the reason), since a property can change
behind the registry's back.

sqlglot does the parsing, not Spark's parser: registration happens in the web process, which
never starts a JVM, and one parser in both places gives one answer. The check fails closed
(a statement sqlglot cannot parse, or anything but a query, is refused), and two independent
layers stand behind it when the step runs: Spark's own grammar must read the statement as a
query (``spark_sql.check_with_spark``), and the session is built with the settings that
disable path-based sources, script transforms and reflection
(``processes.jobs.spark_session``).
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

DIALECT = "spark"

# ``format.`path``` names a data source, not a database: every built-in and common one.
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
# reflect/java_method/try_reflect call any static Java method; identifier() builds a name from
# a string, which this check cannot see through; read_files reads a path.
REFUSED_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect", "identifier", "read_files"})
# Registered tables and CTEs are plain names; anything else (a path, a class name, a URI) is
# not a table of the team.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+\Z")
# Statements and clauses with no place inside the step's query, wherever they are nested.
REFUSED_NODES: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.QueryTransform, "script transforms (TRANSFORM ... USING) run programs on the worker"),
    (exp.LocationProperty, "LOCATION names storage outside the step's output"),
    (exp.UsingProperty, "CREATE FUNCTION ... USING JAR loads code from a jar"),
    (exp.Set, "SET of settings can lift the sandbox"),
    (exp.Command, "only a single SELECT query may run"),
    (exp.DDL, "DDL and DML are not allowed: the step writes its output table itself"),
    (exp.DML, "DDL and DML are not allowed: the step writes its output table itself"),
)
FIRST_WORDS = {
    "SET": "SET of settings can lift the sandbox",
    "RESET": "RESET of settings can lift the sandbox",
    "ADD": "ADD JAR/FILE/ARCHIVE loads code or files onto the worker",
    "LIST": "only a single SELECT query may run",
}


class RefusedStatement(ValueError):
    """A statement the sandbox does not run; the message says why."""

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
    set operations of them) over plain table names with no refused clause or function."""
    first = sql.lstrip(" \t\r\n(").split(None, 1)
    if first and first[0].upper().rstrip(";") in FIRST_WORDS:
        raise RefusedStatement(FIRST_WORDS[first[0].upper().rstrip(";")])
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except SqlglotError as exc:
        reason = str(exc).splitlines()[0]
        raise RefusedStatement(f"the statement cannot be parsed ({reason})") from exc
    if len(statements) != 1:
        raise RefusedStatement(f"one statement may run, not {len(statements)}")
    (tree,) = statements
    nodes = list(tree.walk())
    # The most specific reason first: a CTAS with LOCATION is refused for its LOCATION.
    for kind, reason in REFUSED_NODES:
        if any(isinstance(node, kind) for node in nodes):
            raise RefusedStatement(reason)
    for node in nodes:
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name in REFUSED_FUNCTIONS:
                raise RefusedStatement(f"function {name} is not allowed")
        if isinstance(node, exp.Table):
            _check_table(node)
    if not isinstance(tree, exp.Query):
        raise RefusedStatement(
            f"only a single SELECT query may run, not {tree.key.upper()}: "
            "the step writes its output table itself"
        )


def _check_table(table: exp.Table) -> None:
    if not isinstance(table.this, exp.Identifier):
        return  # a table function, checked as a function
    parts = [p for p in (table.catalog, table.db, table.name) if p]
    shown = ".".join(f"`{p}`" for p in parts)
    if table.db.lower() in DATA_SOURCES or any(not PLAIN_NAME.match(p) for p in parts):
        raise RefusedStatement(
            f"{shown} reads files by path (format.`path`); read registered tables by name"
        )
