"""The allowlist of Spark SQL functions (processes.step_kinds.sql_functions) against Spark's own
function registry: every function Spark has is allowed or refused with a reason, so that a
Spark upgrade cannot add a function a team reaches without anyone deciding on it; and every
allowed function runs on literals, through the guard and through Spark (Spark's own example
from ``DESCRIBE FUNCTION EXTENDED``, or a call of :data:`CALLS`).

To allow a function Spark added: put it in its kind in ``sql_functions.KINDS`` (with an
``Options`` rule in ``RULES`` if it takes options or a schema), update docs/sql.md, and add a
call here if Spark's examples do not pass the guard; to refuse it, add it to
``sql_functions.REFUSED`` with its reason."""

from __future__ import annotations

import re

import pytest
import sqlglot
from pyspark.sql import DataFrame
from pyspark.sql.functions import col
from sqlglot import exp

from processes.step_kinds.sql_functions import ALLOWED, REFUSED
from processes.step_kinds.sql_guard import RefusedStatement, check_statement

pytestmark = pytest.mark.spark

# A call on literals for each allowed function whose examples in Spark's registry are none
# (operators, casts) or do not pass the guard (sqlglot cannot read them).
CALLS = {
    "!": "SELECT ! true",
    "!=": "SELECT 1 != 2",
    "%": "SELECT 5 % 2",
    "&": "SELECT 3 & 5",
    "*": "SELECT 2 * 3",
    "+": "SELECT 1 + 2",
    "-": "SELECT 3 - 1",
    "/": "SELECT 3 / 2",
    "<": "SELECT 1 < 2",
    "<<": "SELECT 1 << 2",
    "<=": "SELECT 1 <= 2",
    "<=>": "SELECT 1 <=> NULL",
    "<>": "SELECT 1 <> 2",
    "=": "SELECT 1 = 1",
    "==": "SELECT 1 == 1",
    ">": "SELECT 2 > 1",
    ">=": "SELECT 2 >= 1",
    ">>": "SELECT 8 >> 1",
    "^": "SELECT 3 ^ 5",
    "|": "SELECT 3 | 5",
    "||": "SELECT 'a' || 'b'",
    "~": "SELECT ~ 0",
    "bigint": "SELECT bigint('1')",
    "binary": "SELECT binary('a')",
    "boolean": "SELECT boolean('true')",
    "case": "SELECT CASE WHEN 1 > 0 THEN 'a' ELSE 'b' END",
    "date": "SELECT date('2020-01-31')",
    "decimal": "SELECT decimal('1.5')",
    "double": "SELECT double('1.5')",
    "float": "SELECT float('1.5')",
    "int": "SELECT int('1')",
    "smallint": "SELECT smallint('1')",
    "string": "SELECT string(1)",
    "timestamp": "SELECT timestamp('2020-01-31 12:00:00')",
    "tinyint": "SELECT tinyint('1')",
    "bitmap_and_agg": "SELECT bitmap_count(bitmap_and_agg(c)) FROM VALUES (X'F0'), (X'70') AS t(c)",
    "bitmap_or_agg": "SELECT bitmap_count(bitmap_or_agg(c)) FROM VALUES (X'F0'), (X'70') AS t(c)",
    "bitmap_count": "SELECT bitmap_count(X'1010')",
}
# Functions whose every call on literals fails by design, with the error that says it ran.
RAISES = {"raise_error": "USER_RAISED_EXCEPTION"}


def system_functions(spark) -> set[str]:
    return {row[0] for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}


def examples(spark, name: str) -> list[str]:
    """The ``> SELECT ...;`` examples of ``DESCRIBE FUNCTION EXTENDED name``, each maybe over
    several lines."""
    if not name.isidentifier():
        return []
    text = "\n".join(row[0] for row in spark.sql(f"DESCRIBE FUNCTION EXTENDED `{name}`").collect())
    found: list[str] = []
    current: str | None = None
    for line in text.splitlines():
        if line.strip().startswith("> "):
            current = line.strip()[2:]
        elif current is not None:
            current += "\n" + line
        else:
            continue
        if current.rstrip().endswith(";"):
            found.append(current.rstrip().rstrip(";"))
            current = None
    return found


def analysed(spark, name: str, call: str) -> tuple[DataFrame | None, str]:
    """``call`` as a DataFrame Spark has analysed (nothing runs yet), if it passes the guard;
    else why not."""
    try:
        check_statement(call)
    except RefusedStatement as exc:
        return None, f"guard: {exc.reason}"
    try:
        return spark.sql(call), ""
    except Exception as exc:
        return None, f"spark: {str(exc).splitlines()[0][:200]}"


def execute(frame: DataFrame) -> None:
    """Run ``frame`` in the JVM: its values as strings (Spark writes no interval column) to
    Spark's noop sink (PySpark cannot bring some types back)."""
    named = frame.toDF(*[f"c{i}" for i in range(len(frame.columns))])  # names repeat
    named.select(*[col(c).cast("string") for c in named.columns]).write.format("noop").mode(
        "overwrite"
    ).save()


def select_list(call: str) -> str | None:
    """The select list of a call that is nothing but ``SELECT <expressions>``, else None."""
    tree = sqlglot.parse_one(call, read="spark")
    if not isinstance(tree, exp.Select) or {k for k, v in tree.args.items() if v} != {
        "expressions"
    }:
        return None
    match = re.fullmatch(r"\s*SELECT\s+(.*?)\s*;?\s*", call, re.IGNORECASE | re.DOTALL)
    return match.group(1) if match else None


def first_that_runs(spark, name: str, calls: list[str]) -> list[str]:
    """Why each of ``calls`` did not run, up to the first that did: [] if one did."""
    reasons = []
    for call in calls:
        frame, reason = analysed(spark, name, call)
        if frame is not None:
            try:
                execute(frame)
                return []
            except Exception as exc:
                if name in RAISES and RAISES[name] in str(exc):
                    return []
                reason = f"spark: {str(exc).splitlines()[0][:200]}"
        reasons.append(f"{call[:80]!r}: {reason}")
    return reasons or ["no example in Spark's registry and none in CALLS"]


def test_every_function_of_sparks_registry_is_allowed_or_refused_with_a_reason(spark):
    registry = system_functions(spark)
    assert len(registry) > 400  # Spark's registry, not an empty answer
    undecided = sorted(registry - set(ALLOWED) - set(REFUSED))
    assert not undecided, (
        f"Spark has functions neither allowed nor refused: {undecided}; decide on each in "
        "processes/step_kinds/sql_functions.py (docs/sql.md says how)"
    )
    assert not set(ALLOWED) & set(REFUSED)
    assert all(reason.strip() for reason in REFUSED.values())
    # An allowed name Spark does not have is a stale entry (or a Spark that lost it).
    assert sorted(set(ALLOWED) - registry) == []


def test_every_allowed_function_runs_on_literals_through_the_guard_and_in_spark(spark):
    registry = system_functions(spark)
    calls = {
        name: [CALLS[name]] if name in CALLS else examples(spark, name)
        for name in sorted(set(ALLOWED) & registry)
    }
    # Each function's first call that passes the guard: the ones that are only a select list
    # run together, 50 functions to a query (a query that fails is halved until its failing
    # call is alone); that call, and every other, runs alone, each function's other calls
    # tried in turn.
    batched: dict[str, str] = {}
    failed: dict[str, list[str]] = {}
    for name, candidates in calls.items():
        passing = [c for c in candidates if analysed_by_guard(c)]
        expressions = select_list(passing[0]) if passing and name not in RAISES else None
        if expressions is not None:
            batched[name] = expressions
        else:
            reasons = first_that_runs(spark, name, candidates)
            if reasons:
                failed[name] = reasons
    pending = sorted(batched)
    batches = [pending[start : start + 50] for start in range(0, len(pending), 50)]
    while batches:
        batch = batches.pop()
        try:
            execute(spark.sql("SELECT " + ", ".join(batched[name] for name in batch)))
        except Exception:
            if len(batch) > 1:  # halves until the call that fails is alone
                batches += [batch[: len(batch) // 2], batch[len(batch) // 2 :]]
                continue
            reasons = first_that_runs(spark, batch[0], calls[batch[0]])
            if reasons:
                failed[batch[0]] = reasons
    assert not failed, "\n".join(f"{name}: {reasons}" for name, reasons in failed.items())


def analysed_by_guard(call: str) -> bool:
    try:
        check_statement(call)
    except RefusedStatement:
        return False
    return True


def test_spark_reads_no_external_entity_in_the_xml_its_functions_parse(spark, tmp_path):
    """xpath_* and from_xml are allowed on the strength of this: an entity that names a file
    is not read (the XSD option, which would, is refused by the guard)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("other team's payroll")
    doc = f'<!DOCTYPE r [<!ENTITY x SYSTEM "{secret.as_uri()}">]><r>&x;</r>'
    statement = (
        f"SELECT xpath_string('{doc}', 'r') AS a, from_xml('{doc}', 'r STRING') AS b, "
        f"schema_of_xml('{doc}') AS c"
    )
    check_statement(statement)
    row = spark.sql(statement).collect()[0]
    assert "payroll" not in str(row.asDict(recursive=True))
