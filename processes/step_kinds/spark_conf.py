"""The Spark settings BDRE decides without a session: the sandbox's, the ones every step
relies on, and what a step may set for itself (its ``spark`` properties). Pure Python: the
registry checks a step's options with it when they are registered, in the web process,
which never imports PySpark or ``spark_session``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings

# Spark's own half of the Spark SQL sandbox (docs/security.md), behind
# ``processes.step_kinds.sql_guard``: a statement the guard let through still cannot read files by
# path, run a program or call a Java method. restrictedMode is static (a session cannot turn
# it off; runSQLOnFiles it could, which is why the guard refuses SET).
SANDBOX_CONF = {
    # The statement the guard checked is the one Spark parses: no ${env:...}, ${system:...}
    # or ${spark:...} text put in (secrets, settings), nor ${...} hiding text from the guard.
    "spark.sql.variable.substitute": "false",
    "spark.sql.runSQLOnFiles": "false",  # no format.`path` tables
    "spark.sql.restrictedMode.enabled": "true",  # no TRANSFORM ... USING, reflect, java_method
    "spark.sql.legacy.allowNonEmptyLocationInCTAS": "false",
    # No Hive metastore: no Hive script transforms, no permanent functions from jars.
    "spark.sql.catalogImplementation": "in-memory",
}


def runtime_conf() -> dict[str, str]:
    """The session settings a step relies on that any session can set, a Connect client's
    too (the codegen cache is static: a Connect server has it from its own start)."""
    return {
        "spark.sql.shuffle.partitions": str(
            settings.SPARK_SHUFFLE_PARTITIONS or (os.cpu_count() or 2) * 2
        ),
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.session.timeZone": "UTC",
        # Spark keeps 100 compiled plans by default; one spark.shred makes about 100 (a
        # window, joins and aggregates each compile several classes), so with anything else
        # in the session every run recompiled them all and the JVM compiled the new classes
        # to machine code again.
        "spark.sql.codegen.cache.maxEntries": "1000",
    }


# Options that would make a session other than the one BDRE checks: a Connect client instead
# of a classic session, or another catalog whose tables the team boundary does not police.
NOT_CONFIGURABLE = ("spark.remote", "spark.api.mode", "spark.sql.catalog.")


# The property group whose keys are Spark options of the step (docs/operations.md).
STEP_GROUP = "spark"

# What a step may set for itself: runtime SQL options that change how its plans run (their
# partitions, joins, file sizes, compression), never what it may read or write nor a
# setting BDRE's steps rely on. Each is an exact key with the type of its value: a prefix
# would let through options nobody has read (spark.sql.adaptive.customCostEvaluatorClass
# makes the shared worker load any class a developer names), and a value Spark parses its
# own way (a class, a rule list, a path) is as much a way in as a key. They are set on the worker's
# session for the step and put back after it.


@dataclass(frozen=True)
class Integer:
    low: int
    high: int

    @property
    def expected(self) -> str:
        return f"an integer from {self.low} to {self.high}"

    def normal(self, value: str) -> str | None:
        if not re.fullmatch(r"-?[0-9]{1,19}", value):
            return None
        return value if self.low <= int(value) <= self.high else None


@dataclass(frozen=True)
class Number:
    low: float
    high: float

    @property
    def expected(self) -> str:
        return f"a number from {self.low:g} to {self.high:g}"

    def normal(self, value: str) -> str | None:
        if not re.fullmatch(r"[0-9]{1,9}(\.[0-9]{1,9})?", value):
            return None
        return value if self.low <= float(value) <= self.high else None


# Spark's byte sizes (JavaUtils.byteStringAs): whole numbers, bytes without a unit.
_BYTE_UNITS = {"": 0, "b": 0, "k": 10, "kb": 10, "m": 20, "mb": 20, "g": 30, "gb": 30}


@dataclass(frozen=True)
class ByteSize:
    gigabytes: int  # the most, in whole GiB
    off: bool = False  # -1 turns the feature off (a broadcast threshold)

    @property
    def expected(self) -> str:
        off = ", or -1 for off" if self.off else ""
        return f"a size like 64m or 128MB (at most {self.gigabytes}g{off})"

    def normal(self, value: str) -> str | None:
        if self.off and value == "-1":
            return value
        # ASCII first: str.lower() folds other letters (the Kelvin sign) into ASCII ones that
        # Spark's own parser would not read.
        found = re.fullmatch(r"([0-9]{1,15})([a-z]*)", value.lower()) if value.isascii() else None
        if found is None or found[2] not in _BYTE_UNITS:
            return None
        size = int(found[1]) << _BYTE_UNITS[found[2]]
        return value.lower() if 1 <= size <= self.gigabytes << 30 else None


# Spark's durations (JavaUtils.timeStringAs); a number without a unit is in seconds for the
# options below.
_SECONDS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


@dataclass(frozen=True)
class Seconds:
    high: int

    @property
    def expected(self) -> str:
        return f"a duration like 300, 300s or 5min (1s to {self.high}s)"

    def normal(self, value: str) -> str | None:
        found = re.fullmatch(r"([0-9]{1,9})([a-z]*)", value.lower()) if value.isascii() else None
        if found is None or found[2] not in _SECONDS:
            return None
        return value.lower() if 1 <= int(found[1]) * _SECONDS[found[2]] <= self.high else None


@dataclass(frozen=True)
class Boolean:
    expected = "true or false"

    def normal(self, value: str) -> str | None:
        return value.lower() if value.isascii() and value.lower() in ("true", "false") else None


@dataclass(frozen=True)
class OneOf:
    names: tuple[str, ...]

    @property
    def expected(self) -> str:
        return f"one of {', '.join(self.names)}"

    def normal(self, value: str) -> str | None:
        return value.lower() if value.isascii() and value.lower() in self.names else None


OptionType = Integer | Number | ByteSize | Seconds | Boolean | OneOf

# Bounds that keep one step from starving the worker's session, which runs other teams'
# steps too: no million-partition shuffle, no broadcast of a table the driver cannot hold.
_PARTITIONS = Integer(1, 100_000)
_FILE_BYTES = ByteSize(16)
_BROADCAST = ByteSize(1, off=True)
_BOOLEAN = Boolean()
STEP_OPTIONS: dict[str, OptionType] = {
    "spark.sql.shuffle.partitions": _PARTITIONS,
    "spark.sql.files.maxPartitionBytes": _FILE_BYTES,
    "spark.sql.files.openCostInBytes": _FILE_BYTES,
    "spark.sql.files.minPartitionNum": _PARTITIONS,
    "spark.sql.files.maxRecordsPerFile": Integer(0, 2**31 - 1),  # 0: no limit
    "spark.sql.autoBroadcastJoinThreshold": _BROADCAST,
    "spark.sql.broadcastTimeout": Seconds(24 * 3600),
    "spark.sql.parquet.compression.codec": OneOf(
        ("none", "uncompressed", "snappy", "gzip", "lzo", "brotli", "lz4", "lz4_raw", "zstd")
    ),
    "spark.sql.parquet.filterPushdown": _BOOLEAN,
    "spark.sql.parquet.mergeSchema": _BOOLEAN,
    "spark.sql.orc.compression.codec": OneOf(
        ("none", "uncompressed", "snappy", "zlib", "lzo", "zstd", "lz4", "brotli")
    ),
    "spark.sql.execution.arrow.pyspark.enabled": _BOOLEAN,
    "spark.sql.execution.arrow.maxRecordsPerBatch": Integer(0, 10_000_000),  # 0: no limit
    "spark.sql.inMemoryColumnarStorage.compressed": _BOOLEAN,
    "spark.sql.inMemoryColumnarStorage.batchSize": Integer(1, 1_000_000),
    "spark.sql.cbo.enabled": _BOOLEAN,
    "spark.sql.cbo.joinReorder.enabled": _BOOLEAN,
    "spark.sql.join.preferSortMergeJoin": _BOOLEAN,
    "spark.sql.limit.scaleUpFactor": Integer(2, 1000),
    # Adaptive execution, one by one: not customCostEvaluatorClass (a class Spark loads)
    # nor optimizer.excludedRules (names of the optimizer's rules to skip).
    "spark.sql.adaptive.enabled": _BOOLEAN,
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": _FILE_BYTES,
    "spark.sql.adaptive.autoBroadcastJoinThreshold": _BROADCAST,
    "spark.sql.adaptive.coalescePartitions.enabled": _BOOLEAN,
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": _BOOLEAN,
    "spark.sql.adaptive.coalescePartitions.minPartitionSize": _FILE_BYTES,
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": _PARTITIONS,
    "spark.sql.adaptive.forceOptimizeSkewedJoin": _BOOLEAN,
    "spark.sql.adaptive.localShuffleReader.enabled": _BOOLEAN,
    "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": ByteSize(1),
    "spark.sql.adaptive.optimizeSkewsInRebalancePartitions.enabled": _BOOLEAN,
    "spark.sql.adaptive.rebalancePartitionsSmallPartitionFactor": Number(0, 1),
    "spark.sql.adaptive.skewJoin.enabled": _BOOLEAN,
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": Number(1, 1000),
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": _FILE_BYTES,
}


class RefusedSparkOption(ValueError):
    pass


def _refusal(key: str) -> str | None:
    if key in STEP_OPTIONS:
        return None
    if key in SANDBOX_CONF or key.startswith(NOT_CONFIGURABLE):
        return "the Spark SQL sandbox's and the catalog's settings are not a step's to set"
    if key in runtime_conf():
        return "BDRE's steps rely on BDRE's own setting of it"
    if key.startswith("spark.sql."):
        return "not one of the Spark SQL options a step may set"
    if key.startswith("spark."):
        # Executors, driver, cores, memory: fixed when the application starts, and the
        # worker's one application serves every step it runs, other teams' too.
        return (
            "it is fixed when the worker's Spark application starts, and a step cannot start "
            "one of its own: set it in the SPARK_CONF of a pool of Spark-queue workers and "
            "send the step to their queue with run.spark_queue"
        )
    return "not a Spark option (spark.*)"


def check_spark_queue(
    kind: str, properties: Mapping[str, Mapping[str, object]], *, spark: bool
) -> None:
    """A step's ``run.spark_queue``: one of ``BDRE_SPARK_QUEUES``, on a Spark step (``spark``:
    its kind runs on Spark)."""
    queue = properties.get("run", {}).get("spark_queue")
    if queue is None:
        return
    if not spark:
        raise RefusedSparkOption(
            f"run.spark_queue: only Spark steps go to a Spark queue; this is "
            f"{kind or 'a job'}: set it on its Spark steps"
        )
    if str(queue) not in settings.BDRE_SPARK_QUEUES:
        raise RefusedSparkOption(
            f"run.spark_queue {queue!r} is not one of BDRE_SPARK_QUEUES: "
            f"{', '.join(settings.BDRE_SPARK_QUEUES)}"
        )


def step_options(
    kind: str, properties: Mapping[str, Mapping[str, object]], *, spark: bool
) -> dict[str, str]:
    """The Spark options a step of ``kind`` (on Spark if ``spark``) sets for itself (its
    ``spark`` properties), or
    :class:`RefusedSparkOption` for the first it may not set. The registry asks when the
    properties are registered, the step again when it runs (a row changed since)."""
    options = {key: str(value) for key, value in properties.get(STEP_GROUP, {}).items()}
    if options and not spark:
        raise RefusedSparkOption(
            f"only Spark steps take {STEP_GROUP} options; this is "
            f"{kind or 'a job'}: set them on its Spark steps"
        )
    checked = {}
    for key, value in sorted(options.items()):
        reason = _refusal(key)
        if reason is None:
            kind_of = STEP_OPTIONS[key]
            normal = kind_of.normal(value.strip())
            if normal is not None:
                checked[key] = normal
                continue
            reason = f"{value!r} is not {kind_of.expected}"
        raise RefusedSparkOption(
            f"{STEP_GROUP} option {key}: {reason} (docs/operations.md, Per-step Spark options)"
        )
    return checked
