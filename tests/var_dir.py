"""A pytest plugin (``-p tests.var_dir`` in pyproject.toml), imported before Django's
settings are read: each pytest-xdist worker gets a var folder of its own.

Everything a test process writes is under ``BDRE_VAR_DIR`` (the SQLite test database, the
filesystem broker's folders, the warehouse, the landing folder, Prometheus' files): two
workers sharing one would consume each other's Celery messages and overwrite each other's
tables. For the same reason a Redis broker gets a database of its own per worker.
pytest-django suffixes the test database's name per worker; the rest is ours."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.helpers import jvm_archive

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    _base = Path(os.environ.get("BDRE_VAR_DIR") or Path(__file__).resolve().parents[1] / "var")
    _own = _base / f"xdist-{_worker}"
    _own.mkdir(parents=True, exist_ok=True)
    os.environ["BDRE_VAR_DIR"] = str(_own)
    # What the processes share, beside their own: the migrated test database's copy
    # (tests/helpers/migrated.py).
    os.environ["BDRE_TEST_SHARED_VAR_DIR"] = str(_base)
    # One folder of S3A jars for all (fetching side by side is safe: bdre/s3a_jars.py), where
    # a single test process would keep them.
    os.environ.setdefault("BDRE_SPARK_JARS_DIR", str(_base / "jars"))
    # redis://host:port/N -> N + 1 + the worker's number (gw0 -> N + 1): Redis has 16.
    _broker = os.environ.get("CELERY_BROKER_URL", "")
    _redis = re.fullmatch(r"(rediss?://[^/]*)(?:/(\d+))?", _broker)
    if _redis:
        _db = int(_redis.group(2) or 0) + 1 + int(_worker.removeprefix("gw"))
        os.environ["CELERY_BROKER_URL"] = f"{_redis.group(1)}/{_db % 16}"

# Every JVM a test starts lives minutes at most (a test process's session, a demo's worker, a
# sync, a notebook, the cluster's daemons): Java's quick compiler only. The optimising one
# took a third of their CPU (compiling Spark's code paths, generated classes too) and never
# paid it back in a run this short; on 2 cores shared by the suite's processes that CPU is
# the suite's time (docs/testing.md, "CI"). And Spark's classes from the class-data archive
# of tests/helpers/jvm_archive.py (`make spark-classes`), when it was made: each JVM's start
# took half the CPU. And the serial collector: G1's concurrent threads cost more than they
# save on heaps of a gigabyte beside a suite that keeps both cores busy (a tenth of a Spark
# module's CPU, docs/testing.md); it maps the archive as G1 does. What Spark does is the same
# either way.
_JVM = " ".join(
    ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", jvm_archive.options(jvm_archive.jars_folder())]
).strip()

# Every Spark application a test starts (the test process's session, a worker's, a demo's on a
# cluster or through Connect, a sync's, the Connect server) runs without whole-stage code
# generation and without adaptive execution: the tests' data is tens to thousands of rows,
# where compiling each plan's generated classes (Janino, then the JVM) and re-planning each
# stage cost more CPU than running it (measured in docs/testing.md, "CI"). Both are Spark's
# own equivalent paths. The test processes' own sessions go further (tests/conftest.py).
# The local demo (`make demo` as users run it, tests/helpers/demo_runs.py) keeps Spark's
# defaults, and the cluster's demo runs are compared with it row for row.
SPARK_TEST_DEFAULTS = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    # The standalone cluster's executors, which the daemons' options below do not reach:
    # their JVMs live as long as a demo run or a test's application.
    "spark.executor.extraJavaOptions": _JVM,
}
# As Java system properties, which Spark reads as its defaults, not as a spark-defaults.conf:
# Spark puts SPARK_CONF_DIR first on every JVM's class path, and Java maps no class-data
# archive for a class path with a folder that has files in it. Quoted for Spark's launcher,
# which splits SPARK_SUBMIT_OPTS as a shell would.
SPARK_TEST_OPTIONS = " ".join(f'"-D{key}={value}"' for key, value in SPARK_TEST_DEFAULTS.items())
if "BDRE_TEST_SPARK_OPTIONS" not in os.environ:  # once: test processes start test processes
    os.environ["BDRE_TEST_SPARK_OPTIONS"] = SPARK_TEST_OPTIONS
    for _name, _options in (
        ("SPARK_SUBMIT_OPTS", f"{_JVM} {SPARK_TEST_OPTIONS}"),
        ("SPARK_DAEMON_JAVA_OPTS", _JVM),
    ):
        os.environ[_name] = f"{os.environ.get(_name, '')} {_options}".strip()
