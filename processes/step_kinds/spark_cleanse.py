"""``spark.cleanse``: validate rows against a declared schema (the CDAP data-cleansing
example): valid rows, cast to their types, go to a clean table; the others go to an invalid
table with every reason they failed. Properties (group ``cleanse``): ``source_table``,
``clean_table``, ``invalid_table`` (``db.table``), and ``rules``, a JSON list of fields::

    [{"name": "id", "type": "int", "required": true},
     {"name": "email", "type": "string", "pattern": "^[^@]+@[^@]+$"}]

The column mapping, source to clean and invalid tables, is recorded as the run's lineage
(``lineage.steps``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lineage.models import QueryKind
from lineage.steps import StepLineage, Write, table_name
from processes.step_kinds import Counters, Prop, StepContext, StepKind, Table, register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TYPES = {
    "string": "string",
    "int": "int",
    "long": "bigint",
    "double": "double",
    "decimal": "decimal(38,9)",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
}


@dataclass(frozen=True)
class Rule:
    name: str
    type: str = "string"
    required: bool = False
    pattern: str = ""


def parse_rules(text: str) -> list[Rule]:
    try:
        items = json.loads(text)
        rules = [Rule(**item) for item in items]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cleanse.rules must be a JSON list of fields: {exc}") from exc
    for rule in rules:
        if rule.type not in TYPES:
            raise ValueError(f"cleanse.rules: {rule.name} has unknown type {rule.type!r}")
    return rules


def validate(df: DataFrame, rules: list[Rule]) -> tuple[DataFrame, DataFrame]:
    """The valid rows (declared fields cast to their types, other columns kept) and the
    invalid ones (as they came, plus ``reason``)."""
    from pyspark.sql import functions as F

    checks = []
    for rule in rules:
        if rule.name not in df.columns:
            checks.append(F.lit(f"{rule.name} is missing"))
            continue
        value = F.col(rule.name)
        cast = value.try_cast(TYPES[rule.type])  # ANSI mode: a bad value is NULL, not an error
        blank = value.isNull() | (F.trim(value.cast("string")) == "")
        if rule.required:
            checks.append(F.when(blank, F.lit(f"{rule.name} is required")))
        checks.append(F.when(~blank & cast.isNull(), F.lit(f"{rule.name} is not a {rule.type}")))
        if rule.pattern:
            checks.append(
                F.when(
                    ~blank & ~value.cast("string").rlike(rule.pattern),
                    F.lit(f"{rule.name} does not match {rule.pattern}"),
                )
            )
    with_reason = df.withColumn("reason", F.concat_ws("; ", *checks))
    valid = with_reason.filter(F.col("reason") == "").drop("reason")
    for rule in rules:
        if rule.name in df.columns:
            valid = valid.withColumn(rule.name, F.col(rule.name).cast(TYPES[rule.type]))
    return valid, with_reason.filter(F.col("reason") != "")


def lineage(
    source: str,
    frame: DataFrame,
    rules: list[Rule],
    clean: tuple[str, DataFrame],
    invalid: tuple[str, DataFrame],
) -> StepLineage:
    """Every source column into the clean table (a ruled one through its rule, and cast when
    its type changes) and, as it came, into the invalid table, whose ``reason`` comes from
    the ruled columns."""
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    ruled = {rule.name: rule for rule in rules if rule.name in types}
    valid = Write(table_name(clean[0]), clean[1].columns)
    rejected = Write(table_name(invalid[0]), invalid[1].columns)
    origin = table_name(source)
    for column in types:
        rule = ruled.get(column)
        if rule is None:
            valid.feed(origin, column, column)
            continue
        cast = ("cast",) if TYPES[rule.type] != types[column] else ()
        valid.feed(origin, column, column, "cleanse rule", *cast)
    rejected.same(origin, types)
    for column in ruled:
        rejected.feed(origin, column, "reason", "cleanse rule")
    return StepLineage(
        f"spark.cleanse: {origin} into {valid.target} (valid rows) and {rejected.target} "
        f"(invalid rows, with the reason); rules: {', '.join(ruled) or 'none'}",
        [valid, rejected],
    )


def spark_cleanse(context: StepContext) -> Counters:
    from processes.step_kinds.spark_io import (
        input_batches,
        read_table,
        start,
        write_batch,
    )
    from processes.step_kinds.spark_session import get_spark

    props = context.properties("cleanse")
    rules = parse_rules(props["rules"])
    spark = get_spark()
    start(context, spark)
    source = read_table(context, spark, props["source_table"], input_batches(context)).drop(
        "batch_id"
    )
    valid, invalid = validate(source, rules)
    valid, invalid = valid.cache(), invalid.cache()
    clean_table, invalid_table = props["clean_table"], props["invalid_table"]
    clean_db, _, clean = clean_table.rpartition(".")
    bad_db, _, bad = invalid_table.rpartition(".")
    write_batch(valid, context, clean_db or "default", clean)
    write_batch(invalid, context, bad_db or "default", bad, comments="rows that failed cleansing")
    context.record_lineage(
        lambda: lineage(
            props["source_table"],
            source,
            rules,
            (clean_table, valid),
            (invalid_table, invalid),
        ),
    )
    rows_out, bad_rows = valid.count(), invalid.count()
    return {"rows_in": rows_out + bad_rows, "rows_out": rows_out, "bad_rows": bad_rows}


KIND = register(
    StepKind(
        "spark.cleanse",
        spark_cleanse,
        properties={
            "cleanse": {
                "source_table": Prop(help="the table read (db.table; required)"),
                "clean_table": Prop("default.{step}_clean", "valid rows, cast (db.table)"),
                "invalid_table": Prop(
                    "default.{step}_invalid", "invalid rows, with every reason (db.table)"
                ),
                "rules": Prop("[]", "a JSON list of fields: name, type, required, pattern"),
            }
        },
        writes=(Table("cleanse", "clean_table"), Table("cleanse", "invalid_table")),
        reads=(Table("cleanse", "source_table"),),
        query_kind=QueryKind.SPARK_CLEANSE,
        spark=True,
        accounts=True,
    )
)
