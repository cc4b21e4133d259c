"""``spark.cleanse``: validate rows against a declared schema (the CDAP data-cleansing
example): valid rows, cast to their types, go to a clean table; the others go to an invalid
table with every reason they failed. Properties (group ``cleanse``): ``source_table``,
``clean_table``, ``invalid_table`` (``db.table``), and ``rules``, a JSON list of fields::

    [{"name": "id", "type": "int", "required": true},
     {"name": "email", "type": "string", "pattern": "^[^@]+@[^@]+$"}]
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from processes.jobs import Counters, JobContext, register
from processes.jobs.spark_io import input_batches, read_table, start, write_batch
from processes.jobs.spark_session import get_spark

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


@register("spark.cleanse")
def spark_cleanse(context: JobContext) -> Counters:
    props = context.properties("cleanse")
    rules = parse_rules(props.get("rules", "[]"))
    spark = get_spark()
    start(context, spark)
    source = read_table(context, spark, props["source_table"], input_batches(context)).drop(
        "batch_id"
    )
    valid, invalid = validate(source, rules)
    valid, invalid = valid.cache(), invalid.cache()
    clean_db, _, clean = props.get("clean_table", f"default.{context.step.name}_clean").rpartition(
        "."
    )
    bad_db, _, bad = props.get("invalid_table", f"default.{context.step.name}_invalid").rpartition(
        "."
    )
    write_batch(valid, context, clean_db or "default", clean)
    write_batch(invalid, context, bad_db or "default", bad, comments="rows that failed cleansing")
    rows_out, bad_rows = valid.count(), invalid.count()
    return {"rows_in": rows_out + bad_rows, "rows_out": rows_out, "bad_rows": bad_rows}
