"""Expectations on what a Spark step writes (docs/quality.md): rules declared per output table
in the step's ``expect`` properties, counted by Spark as the step writes each batch's attempt,
before it is published (``spark_io.write_batch``).

A rule is the property ``expect.<table>.<name>`` (``<table>`` as the step writes it, without
its database), its value ``<action>: <rule>``:

- a **row rule**, a SQL boolean over the row (``event_id IS NOT NULL``), checked by the same
  sandbox as a step's query (``sql_guard``); a row for which it is false or NULL fails it;
- a **batch rule**: ``unique(<column>, ...)`` (no two rows of the batch, nor a row of the
  batch and one of the table's other batches, share the key), ``rows(<min>, <max>)`` (the
  batch's row count; ``*`` for no bound), ``null_ratio(<column>) <= <ratio>``,
  ``freshness(<column>) <= <age>`` and ``volume(<batches>, <factor>)`` (against the rows of
  the batches the rule was checked on before);
- the **accounting** of the step, ``accounting()``: the rows it read are the rows it wrote to
  the table, with those a drop rule quarantined and those it set aside (bad rows, duplicates
  dropped), and, along the chain, the rows the steps before it published in what it read.
  Checked from the numbers of the step's run once its body has written everything
  (:func:`account`), never by a scan of its own.

The action: ``warn`` counts the failures; ``drop`` (row rules) writes the failing rows to
``<table>_quarantine`` with the rules they failed, their text and the run, and the others to
the table; ``fail`` fails the step naming the rule and its counts, and nothing of the batch
is published, so nothing downstream runs on it. The rules of a table are counted in the one
pass that writes the batch (:func:`plan`, an observation of the write); a unique key reads
the key columns of the rows written and of the table's other batches, and the quarantine is a
second pass over the batch, made only when a drop rule took rows out."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from sqlglot import exp
from sqlglot.errors import SqlglotError

from bdre import sql_parse
from processes.step_kinds import RefusedProperty

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation

GROUP = "expect"
ACTIONS = ("warn", "drop", "fail")
QUARANTINE_SUFFIX = "_quarantine"
SAMPLES = 3  # failing rows kept on the run per rule (their key columns)
IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
KEY = re.compile(rf"(?P<table>{IDENTIFIER})\.(?P<name>{IDENTIFIER})")
RULE = re.compile(r"\s*(?P<action>[a-z]+)\s*:\s*(?P<body>.+?)\s*", re.S)
UNIQUE = re.compile(rf"unique\(\s*({IDENTIFIER}(?:\s*,\s*{IDENTIFIER})*)\s*\)", re.I)
BOUND = r"(\d+|\*)"
ROWS = re.compile(rf"rows\(\s*{BOUND}\s*,\s*{BOUND}\s*\)", re.I)
NULL_RATIO = re.compile(rf"null_ratio\(\s*({IDENTIFIER})\s*\)\s*<=\s*([01](?:\.\d+)?)", re.I)
FRESHNESS = re.compile(rf"freshness\(\s*({IDENTIFIER})\s*\)\s*<=\s*(\d+)\s*([smhd])", re.I)
VOLUME = re.compile(r"volume\(\s*(\d+)\s*,\s*(\d+(?:\.\d+)?)\s*\)", re.I)
ACCOUNTING = re.compile(r"accounting\(\s*\)", re.I)
BATCH_WORDS = re.compile(r"(unique|rows|null_ratio|freshness|volume|accounting)\s*\(", re.I)
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_HISTORY = 1000  # batches a volume rule may compare with
# Functions whose answer changes from one read of a row to the next (the time, chance, where
# Spark runs it): a row rule with one could drop a row in the write and keep it out of its
# quarantine, or put it in both.
VOLATILE = {
    "current_date", "current_timestamp", "curdate", "localtimestamp", "now", "rand", "randn",
    "random", "shuffle", "uuid", "spark_partition_id", "monotonically_increasing_id",
    "unix_timestamp", "current_timezone",
}  # fmt: skip


class RefusedExpectation(RefusedProperty):
    log_id = "expect.refused"


class ExpectationFailed(RuntimeError):
    """A ``fail`` rule failed: the batch is not published; the message names the rules."""


@dataclass(frozen=True)
class Rule:
    table: str
    name: str
    action: str
    text: str  # as declared, after the action
    kind: str  # "row", "unique", "rows", "null_ratio", "freshness", "volume", "accounting"
    columns: tuple[str, ...] = ()  # unique's key; null_ratio's, freshness' column; a row rule's
    low: int | None = None  # rows' bounds; volume's number of batches
    high: int | None = None
    ratio: float = 0.0  # null_ratio's share; volume's factor
    seconds: int = 0  # freshness' age


def parse(key: str, value: str) -> Rule:
    """The rule of the property ``expect.<key>``, or RefusedExpectation saying what to write."""
    named = KEY.fullmatch(key)
    if named is None:
        raise RefusedExpectation(
            f"expect.{key}: name a rule <table>.<rule>, both plain identifiers "
            "(expect.atomic_events.event_id_present)"
        )
    table, name = named["table"], named["name"]
    ruled = RULE.fullmatch(value or "")
    if ruled is None or ruled["action"] not in ACTIONS:
        raise RefusedExpectation(
            f"expect.{key}: write <action>: <rule>, the action one of {', '.join(ACTIONS)} "
            f"(drop: event_id IS NOT NULL), not {value[:80]!r}"
        )
    action, body = ruled["action"], ruled["body"]
    batch = _batch_rule(key, table, name, action, body)
    if batch is not None:
        return batch
    return Rule(table, name, action, body, "row", _row_columns(key, body))


def _batch_rule(key: str, table: str, name: str, action: str, body: str) -> Rule | None:
    """The batch rule ``body`` says, or None for a row rule."""
    unique, rows, null_ratio = (
        UNIQUE.fullmatch(body),
        ROWS.fullmatch(body),
        NULL_RATIO.fullmatch(body),
    )
    freshness, volume = FRESHNESS.fullmatch(body), VOLUME.fullmatch(body)
    accounting = ACCOUNTING.fullmatch(body)
    if not (unique or rows or null_ratio or freshness or volume or accounting):
        if BATCH_WORDS.match(body):
            raise RefusedExpectation(
                f"expect.{key}: a batch rule is unique(<column>, ...), rows(<min>, <max>) "
                "with * for no bound, null_ratio(<column>) <= <ratio from 0 to 1>, "
                "freshness(<column>) <= <age: 90m, 6h, 2d>, volume(<batches>, <factor>) or "
                f"accounting(); not {body[:80]!r}"
            )
        return None
    if action == "drop":
        raise RefusedExpectation(
            f"expect.{key}: {body} is a rule of the whole batch: its action is warn or fail "
            "(drop takes rows out, a row rule's action)"
        )
    rule = Rule(table, name, action, body, "")
    if accounting is not None:
        return replace(rule, kind="accounting")
    if unique is not None:
        columns = tuple(c.strip() for c in unique[1].split(","))
        return replace(rule, kind="unique", columns=columns)
    if rows is not None:
        low, high = (None if b == "*" else int(b) for b in (rows[1], rows[2]))
        if low is not None and high is not None and low > high:
            raise RefusedExpectation(
                f"expect.{key}: rows({low}, {high}): the minimum is above the maximum"
            )
        return replace(rule, kind="rows", low=low, high=high)
    if null_ratio is not None:
        ratio = float(null_ratio[2])
        if ratio > 1:
            raise RefusedExpectation(f"expect.{key}: a null ratio is from 0 to 1, not {ratio}")
        return replace(rule, kind="null_ratio", columns=(null_ratio[1],), ratio=ratio)
    if freshness is not None:
        seconds = int(freshness[2]) * SECONDS[freshness[3].lower()]
        return replace(rule, kind="freshness", columns=(freshness[1],), seconds=seconds)
    assert volume is not None
    batches, factor = int(volume[1]), float(volume[2])
    if not 1 <= batches <= MAX_HISTORY or factor < 1:
        raise RefusedExpectation(
            f"expect.{key}: volume(<batches>, <factor>) compares the batch's rows with the "
            f"median of the last 1 to {MAX_HISTORY} batches, within a factor of 1 or more "
            f"(volume(10, 2): from half to twice the median); not {body[:80]!r}"
        )
    return replace(rule, kind="volume", low=batches, ratio=factor)


def _row_columns(key: str, body: str) -> tuple[str, ...]:
    """The columns a row rule reads, once the sandbox has let it through as an expression
    over the row alone (no query, no table, no aggregate, no window)."""
    from processes.step_kinds.sql_guard import DIALECT, RefusedStatement, check_statement

    try:
        check_statement(f"SELECT 1 FROM t WHERE ({body})")
        (tree,) = sql_parse.parse(f"SELECT 1 FROM t WHERE ({body})", DIALECT)
        # Alone too, as Spark reads it: "a) OR (b" is a boolean only inside the parentheses.
        alone = sql_parse.parse(body, DIALECT)
    except (RefusedStatement, sql_parse.StatementTooDeep) as exc:
        raise RefusedExpectation(f"expect.{key}: {exc}") from exc
    except SqlglotError as exc:
        reason = str(exc).splitlines()[0]
        raise RefusedExpectation(f"expect.{key}: the rule cannot be parsed ({reason})") from exc
    if len(alone) != 1 or not isinstance(alone[0], exp.Condition):
        raise RefusedExpectation(f"expect.{key}: a row rule is one boolean over the row")
    where = tree.args.get("where")
    if not isinstance(tree, exp.Select) or where is None or tree.args.get("joins"):
        raise RefusedExpectation(f"expect.{key}: a row rule is one boolean over the row")
    inner = list(where.this.walk())
    if any(isinstance(n, (exp.Query, exp.Subquery, exp.AggFunc, exp.Window)) for n in inner):
        raise RefusedExpectation(
            f"expect.{key}: a row rule reads the row alone: no query, aggregate or window "
            f"(a batch rule checks the whole batch: unique(...), rows(...), null_ratio(...))"
        )
    called = {
        (n.name if isinstance(n, exp.Anonymous) else n.sql_name()).lower()
        for n in where.this.find_all(exp.Func)
    }
    if called & VOLATILE:
        raise RefusedExpectation(
            f"expect.{key}: a row rule gives the same answer each time a row is read (it is "
            "read as the batch is written, and again for its quarantine and its failing "
            f"rows): no {', '.join(sorted(called & VOLATILE))}; compare with a column, or "
            "check a timestamp with freshness(<column>) <= <age>"
        )
    # The top-level column a name reads (``contexts`` of ``contexts.page_type``); a lambda's
    # variable is among them too, and is left out where the batch has no such column.
    return tuple(sorted({c.table or c.name for c in where.this.find_all(exp.Column)}))


def rules_of(properties: Mapping[str, Any]) -> list[Rule]:
    """Every rule of an ``expect`` group, in the order of their names; the first bad one
    refused."""
    return [parse(key, str(value)) for key, value in sorted(properties.items())]


def check(groups: Mapping[str, Mapping[str, Any]], *, accounts: bool = False) -> None:
    """A step's ``expect`` group as registered and before each run; ``accounts``: whether
    its kind counts the rows it reads and sets aside (an accounting rule's numbers)."""
    for rule in rules_of(groups.get(GROUP, {})):
        if rule.kind == "accounting" and not accounts:
            raise RefusedExpectation(
                f"expect.{rule.table}.{rule.name}: accounting() checks a step that counts the "
                "rows it reads and sets aside (spark.shred, spark.load, spark.cleanse); this "
                "step's rows read do not add up to its rows written (a query aggregates, "
                "joins and filters): check it with rows(...) or volume(...)"
            )


def in_spark(rules: list[Rule]) -> list[Rule]:
    """The rules checked on the batch's rows as it is written (all but the accounting)."""
    return [r for r in rules if r.kind != "accounting"]


# --- in Spark -------------------------------------------------------------------------------


@dataclass
class Planned:
    """A table's rules on the way to its write: the rows to write (those no drop rule took
    out), which count every rule's numbers as Spark writes them (an ``Observation``: the
    write is the one pass over the batch), and the batch with its rule flags, of which the
    quarantine is made when a drop rule took rows out."""

    rules: list[Rule]
    kept: DataFrame
    marked: DataFrame
    flags: dict[str, str]
    observation: Observation
    dropping: Column | None  # true for a row a drop rule takes out; None: no drop rule


@dataclass
class Checked:
    results: list[dict[str, Any]]
    failed: list[str]  # the fail rules that failed, as the step's error says them
    dropped: int  # rows a drop rule took out


def plan(df: DataFrame, rules: list[Rule]) -> Planned:
    """The batch ``df`` to write with ``rules`` counted on the way: write ``kept``, then
    :func:`measure`."""
    from pyspark.sql import functions as F

    row_rules = [r for r in rules if r.kind == "row"]
    flags = {r.name: f"_ok_{i}" for i, r in enumerate(row_rules)}
    marked = df.select(
        "*", *[F.coalesce(F.expr(r.text), F.lit(False)).alias(flags[r.name]) for r in row_rules]
    )
    dropping = None
    for rule in row_rules:
        if rule.action == "drop":
            fails = ~F.col(flags[rule.name])
            dropping = fails if dropping is None else dropping | fails
    # A row rule is checked on every row of the batch; a rule of the whole batch on the
    # rows written (those no drop rule took out).
    aggregates = [F.count(F.lit(1)).alias("_rows")]
    aggregates += [F.count_if(~F.col(flags[r.name])).alias(flags[r.name]) for r in row_rules]
    written = F.lit(True)
    if dropping is not None:
        aggregates.append(F.count_if(dropping).alias("_dropped"))
        written = ~dropping
    nulls = {r.columns[0] for r in rules if r.kind == "null_ratio"}
    aggregates += [
        F.count_if(written & F.col(c).isNull()).alias(f"_null_{c}") for c in sorted(nulls)
    ]
    # An instant, as seconds since the epoch: the same whatever the session's time zone.
    newest = {r.columns[0] for r in rules if r.kind == "freshness"}
    aggregates += [
        F.max(F.when(written, F.col(c).cast("timestamp").cast("long"))).alias(f"_newest_{c}")
        for c in sorted(newest)
    ]
    # Unnamed: a name of its own (a UUID), which no other observation in the plan has.
    observation = _observation(df)
    observed = marked.observe(observation, *aggregates)
    kept = observed if dropping is None else observed.filter(~dropping)
    return Planned(rules, kept.drop(*flags.values()), marked, flags, observation, dropping)


def _observation(df: DataFrame) -> Observation:
    """An observation of the kind ``df``'s session takes: a Spark Connect client's, or a
    classic session's (pyspark picks by the process's mode, which a process with both does
    not tell)."""
    if type(df).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect.observation import Observation as ConnectObservation

        return cast("Observation", ConnectObservation())
    from pyspark.sql import Observation

    return Observation()


def measure(
    planned: Planned,
    written: DataFrame,
    *,
    others: DataFrame | None,
    history: Callable[[Rule], list[int]],
) -> Checked:
    """The rules' results once ``planned.kept`` is written (``written``: those rows as
    written, read back): the numbers the write counted; a unique key on the rows written,
    against ``others``, the table's other batches (None when it has none yet);
    ``history(rule)`` the rows of the batches the rule was checked on before, latest first
    (for a volume rule). Samples of failing rows: :func:`sample`."""
    totals = planned.observation.get
    if "_rows" not in totals:
        # Spark completes an observation it found no numbers for as empty.
        raise RuntimeError(
            "Spark returned no counts of the expectations from the write: the batch is not "
            "published (see the worker's log)"
        )
    rows = int(totals["_rows"])
    dropped = int(totals.get("_dropped") or 0)
    results = []
    for rule in planned.rules:
        samples: list[dict[str, Any]] = []
        observed = ""
        if rule.kind == "row":
            failed = int(totals[planned.flags[rule.name]])
            ok = not failed
            results.append(_result(rule, rows, failed, samples, observed, ok=ok))
            continue
        # A rule of the whole batch judges the rows written: a row a drop rule took out is in
        # no key and no count of the table.
        kept = rows - dropped
        if rule.kind == "unique":
            failed, samples = _duplicates(written, rule.columns, others)
            ok = not failed
        else:
            # A rule of the whole batch fails an empty batch too (no rows to count as failed).
            ok, observed = _batch_holds(rule, kept, totals, history)
            failed = 0 if ok else kept
        results.append(_result(rule, kept, failed, samples, observed, ok=ok))
    failing = [
        f"{r['table']}.{r['rule']} ({r['rule_text']}): {r['failed']} of {r['checked']} failed"
        for r in results
        if r["action"] == "fail" and not r["ok"]
    ]
    return Checked(results, failing, dropped)


def quarantine(planned: Planned, checked: Checked, run_id: int) -> DataFrame:
    """The rows a drop rule took out, with the rules they failed, their text and the run: a
    second pass over the batch when the write counted rows dropped, else no row (and no
    pass: Spark answers an empty frame without reading)."""
    from pyspark.sql import functions as F

    columns = [c for c in planned.marked.columns if c not in planned.flags.values()]
    if planned.dropping is None or not checked.dropped:
        return planned.marked.limit(0).select(
            *columns,
            F.lit("").alias("failed_rules"),
            F.lit("").alias("rule_text"),
            F.lit(run_id).cast("long").alias("run_id"),
        )
    dropping = [r for r in planned.rules if r.kind == "row" and r.action == "drop"]
    why = [F.when(~F.col(planned.flags[r.name]), F.lit(r.name)) for r in dropping]
    text = [F.when(~F.col(planned.flags[r.name]), F.lit(r.text)) for r in dropping]
    return planned.marked.filter(planned.dropping).select(
        *columns,
        F.concat_ws(", ", *why).alias("failed_rules"),
        F.concat_ws("; ", *text).alias("rule_text"),
        F.lit(run_id).cast("long").alias("run_id"),
    )


def sample(checked: Checked, rules: list[Rule], written: DataFrame, held: DataFrame | None) -> None:
    """A few failing rows (the columns each row rule reads) of each row rule that failed,
    found in what was written: a drop rule's in the quarantine ``held`` (None: not written),
    another's in the table's rows ``written``, then in the quarantine."""
    from pyspark.sql import functions as F

    by_name = {r.name: r for r in rules}
    for result in checked.results:
        rule = by_name[result["rule"]]
        if rule.kind != "row" or not result["failed"]:
            continue
        found_in = [written] if rule.action != "drop" else []
        found_in += [held] if held is not None else []
        for rows in found_in:
            columns = [c for c in rule.columns if c in rows.columns]
            failing = rows.filter(~F.coalesce(F.expr(rule.text), F.lit(False)))
            result["samples"] += _samples(failing, columns, SAMPLES - len(result["samples"]))


def _batch_holds(
    rule: Rule, rows: int, totals: Mapping[str, Any], history: Callable[[Rule], list[int]]
) -> tuple[bool, str]:
    """Whether a rule of the whole batch holds (its rows then pass or fail together), and
    what was seen."""
    if rule.kind == "rows":
        ok = (rule.low is None or rows >= rule.low) and (rule.high is None or rows <= rule.high)
        return ok, f"{rows} rows"
    if rule.kind == "null_ratio":
        nulls = int(totals[f"_null_{rule.columns[0]}"])
        share = nulls / rows if rows else 0.0
        return share <= rule.ratio, f"{nulls} of {rows} rows NULL ({share:.1%})"
    if rule.kind == "freshness":
        newest = totals[f"_newest_{rule.columns[0]}"]
        if newest is None:
            return False, f"no {rule.columns[0]} in the batch"
        age = int(time.time()) - int(newest)
        return age <= rule.seconds, f"the newest {rule.columns[0]} is {_age(age)} old"
    earlier = history(rule)[: rule.low]
    if not earlier:
        return True, "no earlier batch to compare with"
    median = statistics.median(earlier)
    ok = median / rule.ratio <= rows <= median * rule.ratio
    return ok, f"{rows} rows; the median of the last {len(earlier)} batches: {median:g}"


def _age(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds}s"


def _result(
    rule: Rule, rows: int, failed: int, samples: list[dict[str, Any]], observed: str, *, ok: bool
) -> dict[str, Any]:
    return {
        "ok": ok,
        "table": rule.table,
        "rule": rule.name,
        "rule_text": rule.text,
        "kind": rule.kind,
        "action": rule.action,
        "checked": rows,
        "passed": rows - failed,
        "failed": failed,
        "samples": samples,
        "observed": observed,
    }


def _samples(failing: DataFrame, columns: list[str], wanted: int) -> list[dict[str, Any]]:
    if wanted <= 0 or not columns:
        return []
    return [_plain(row.asDict()) for row in failing.select(*columns).limit(wanted).collect()]


def is_failure(result: Mapping[str, Any]) -> bool:
    """Whether a rule's result is a failure (a result kept before ``ok`` was: rows failed)."""
    return not result.get("ok", not result.get("failed"))


def described(result: Mapping[str, Any]) -> str:
    """A rule's result in a line, as the step's log and the alert say it."""
    observed = result.get("observed")
    return (
        f"{result['table']}.{result['rule']} ({result['action']}: {result['rule_text']}): "
        f"{result['failed']} of {result['checked']} rows failed"
        + (f"; {observed}" if observed else "")
    )


def _duplicates(
    written: DataFrame, key: tuple[str, ...], others: DataFrame | None
) -> tuple[int, list[dict[str, Any]]]:
    """The rows written of the batch whose key another row of the batch or of the table's
    other batches has, and a few of those keys."""
    from pyspark.sql import functions as F

    counted = written.groupBy(*key).agg(F.count(F.lit(1)).alias("_n"))
    if others is not None:
        taken = others.select(*key).distinct().withColumn("_taken", F.lit(True))
        counted = counted.join(taken, list(key), "left")
    else:
        counted = counted.withColumn("_taken", F.lit(None).cast("boolean"))
    clashing = counted.filter((F.col("_n") > 1) | F.col("_taken").isNotNull())
    total = clashing.agg(F.sum("_n").alias("rows")).first()
    failed = int(total["rows"] or 0) if total is not None else 0
    samples = [_plain(r.asDict()) for r in clashing.select(*key).limit(SAMPLES).collect()]
    return failed, samples


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A sample row as JSON keeps it (dates and times as text)."""
    return {
        k: v if v is None or isinstance(v, (bool, int, float, str)) else str(v)
        for k, v in row.items()
    }


# --- the accounting, from the step run's numbers ---------------------------------------------


@dataclass(frozen=True)
class Ledger:
    read: int | None  # the step's rows_in
    written: int  # the rows of its partition of the table, counted once written (none: 0)
    quarantined: int  # the rows a drop rule moved to the table's quarantine
    set_aside: dict[str, int]  # bad, duplicates: the counters' (processes.counters)
    upstream: int | None  # the rows the steps before it published in what it read
    unknown: str = ""  # why the numbers cannot be compared, when they cannot

    @property
    def accounted(self) -> int:
        return self.written + self.quarantined + sum(self.set_aside.values())


def ledger(
    counters: Mapping[str, Any],
    written: Mapping[tuple[str, str], int | None],
    table: str,
    upstream: int | None,
    *,
    uncounted: set[tuple[str, ...]] | None = None,
    kind: str = "",
) -> Ledger:
    """The numbers an accounting rule on ``table`` compares: ``written`` is the step run's
    partitions by (database, table), lower case, their rows as counted once written;
    ``uncounted`` the tables it wrote in place, which nobody counted; ``kind`` the step's,
    which names what it set aside (a cleanse's bad rows are invalid ones)."""
    from processes.counters import set_aside

    read = counters.get("rows_in")
    name, quarantine = table.lower(), (table + QUARANTINE_SUFFIX).lower()
    rows = [n for (_, t), n in written.items() if t == name]
    held = [n for (_, t), n in written.items() if t == quarantine]
    unknown = ""
    if len(rows) > 1:
        unknown = f"the step wrote {len(rows)} tables named {table}"
    elif None in rows + held or any(t in (name, quarantine) for _, t in uncounted or set()):
        unknown = f"the rows of {table} were not counted as written (written in place)"
    return Ledger(
        read=read if isinstance(read, int) else None,
        written=sum(n or 0 for n in rows),
        quarantined=sum(n or 0 for n in held),
        set_aside=set_aside(counters, kind=kind),
        upstream=upstream,
        unknown=unknown,
    )


def audit(rule: Rule, books: Ledger) -> dict[str, Any]:
    """An accounting rule's result: the rows read, and those that no written, quarantined or
    set-aside row (or no published upstream row) accounts for, failed."""
    read = books.read
    if read is None or books.unknown:
        why = books.unknown or "the step counted no rows read"
        return _result(rule, 0, 0, [], f"cannot be checked: {why}", ok=False)
    parts = [f"{books.written} written", f"{books.quarantined} quarantined"]
    parts += [f"{n} {why}" for why, n in books.set_aside.items()]
    observed = f"{read} read, {books.accounted} accounted for: " + " + ".join(parts)
    unaccounted = abs(read - books.accounted)
    if books.upstream is not None:
        observed += f"; {books.upstream} published upstream in what it read"
        unaccounted += abs(books.upstream - read)
    return _result(rule, read, min(unaccounted, read), [], observed, ok=not unaccounted)
