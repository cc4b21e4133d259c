"""One SparkSession per worker process, created on first use and configured from settings.

Imported only by the Spark step kinds, never at start-up: the web process and the workers
start without PySpark.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None

# Spark's own half of the Spark SQL sandbox (docs/security.md), behind
# ``processes.jobs.sql_guard``: a statement the guard let through still cannot read files by
# path, run a program or call a Java method. restrictedMode is static (a session cannot turn
# it off; runSQLOnFiles it could, which is why the guard refuses SET).
SANDBOX_CONF = {
    "spark.sql.runSQLOnFiles": "false",  # no format.`path` tables
    "spark.sql.restrictedMode.enabled": "true",  # no TRANSFORM ... USING, reflect, java_method
    "spark.sql.legacy.allowNonEmptyLocationInCTAS": "false",
    # No Hive metastore: no Hive script transforms, no permanent functions from jars.
    "spark.sql.catalogImplementation": "in-memory",
}


def get_spark() -> SparkSession:
    """The process's SparkSession (``SPARK_MASTER``, warehouse under ``BDRE_WAREHOUSE``, UI
    off unless ``SPARK_UI=true``, shuffle partitions sized for the machine, the sandbox's
    settings)."""
    global _session
    with _lock:
        if _session is None or _session.sparkContext._jsc is None:
            from pyspark.sql import SparkSession

            cores = os.cpu_count() or 2
            warehouse = settings.BDRE_WAREHOUSE
            builder = (
                SparkSession.builder.master(settings.SPARK_MASTER)
                .appName("bdre")
                .config("spark.sql.warehouse.dir", str(warehouse / "spark-warehouse"))
                .config("spark.ui.enabled", str(settings.SPARK_UI).lower())
                .config("spark.ui.showConsoleProgress", "false")
                .config(
                    "spark.sql.shuffle.partitions",
                    str(settings.SPARK_SHUFFLE_PARTITIONS or cores * 2),
                )
                .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.driver.memory", settings.SPARK_DRIVER_MEMORY)
                # Spark keeps 100 compiled plans by default; one spark.shred makes about
                # 100 (a window, joins and aggregates each compile several classes), so
                # with anything else in the session every run recompiled them all and the
                # JVM compiled the new classes to machine code again.
                .config("spark.sql.codegen.cache.maxEntries", "1000")
            )
            for key, value in SANDBOX_CONF.items():
                builder = builder.config(key, value)
            _session = builder.getOrCreate()
            _session.sparkContext.setLogLevel("WARN")
        return _session


def cancel_all() -> None:
    """Cancel every running Spark job of this process's session, if it has one."""
    session = _session
    if session is not None and session.sparkContext._jsc is not None:
        session.sparkContext.cancelAllJobs()
