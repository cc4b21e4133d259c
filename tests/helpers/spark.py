"""Where the suite's Spark runs, and what that rules out."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

# Where the suite's Spark runs: local[2] by default; the cluster tests (tests/cluster/) run
# the Spark tests again with BDRE_TEST_SPARK set to a standalone master (spark://...) or to a
# Spark Connect server (sc://...).
TEST_SPARK = os.environ.get("BDRE_TEST_SPARK", "local[2]")
# For a test whose Spark must be this process's own JVM (an in-memory Derby database, say): it
# is run on local[2] and said to be skipped elsewhere.
one_jvm_only = pytest.mark.skipif(
    not TEST_SPARK.startswith("local"),
    reason=f"needs Spark in this process's JVM; BDRE_TEST_SPARK is {TEST_SPARK}",
)

# Why the suite's session has no S3A connector, if it has none (the s3a tests skip with it);
# filled when the session's `spark` fixture starts it (tests/conftest.py).
S3A_MISSING: list[str] = []


def published(spark, table):
    """What a reader of ``table`` (a HiveTable, or its location) sees: its published
    partitions (batches.partitions), with their ``batch_id``; no rows, with the table's
    columns, before the first. A table BDRE never wrote by attempts is read as its folder is."""
    from batches import partitions
    from batches.models import HiveTable
    from processes.step_kinds.spark_io import read_partitions

    # Several teams' tables may name one folder (tests/processes/step_kinds/
    # test_table_ownership.py): a location stands for all of them.
    found = (
        [table] if isinstance(table, HiveTable) else list(HiveTable.objects.filter(location=table))
    )
    location = found[0].location
    if not any(partitions.tracked(t) for t in found):
        return spark.read.parquet(location)
    paths = [p.location for t in found for p in partitions.published(t)]
    return read_partitions(spark, location, paths, schema_of=found[0].ddl or None)


# What every JVM a test starts is given (tests/var_dir.py): Java's quick compiler, the
# class-data archive and the tests' Spark defaults. They change how much CPU Spark takes, not
# what it does; a notebook's JVM without them compiled Spark's code paths with the optimising
# compiler and generated code for every plan (docs/testing.md, "Side by side").
JVM_OPTIONS = ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS")


def user_environment(environ: Mapping[str, str], *dropped: str) -> dict[str, str]:
    """``environ`` as a user's own process (a notebook, ``manage.py sync_catalog``) would have
    it: no ``SPARK_`` variable of the test process's (a master, a Connect server, a conf),
    nor any whose name starts with one of the prefixes ``dropped``; the JVMs' options kept."""
    return {
        k: v
        for k, v in environ.items()
        if k in JVM_OPTIONS or not k.startswith(("SPARK_", *dropped))
    }
