"""Step bodies for the orchestration tests (``python.callable`` steps name them)."""

from __future__ import annotations

import time
from pathlib import Path

from processes.jobs import JobContext


def sleep(context: JobContext) -> dict:
    seconds = float(context.properties("test").get("sleep", "0"))
    time.sleep(seconds)
    return {"slept": seconds}


def fail_until_flag(context: JobContext) -> dict:
    """Fails until the file named by ``test.flag`` exists."""
    flag = Path(context.properties("test")["flag"])
    if not flag.exists():
        raise RuntimeError(f"{flag.name} is not there yet")
    return {"flag": flag.name}


def slow_spark_job(context: JobContext) -> dict:
    """A Spark job of a minute; writes to ``test.outcome`` whether it finished or was
    cancelled."""
    from processes.jobs.spark_io import start
    from processes.jobs.spark_session import get_spark

    outcome = Path(context.properties("test")["outcome"])
    spark = get_spark()
    start(context, spark)
    try:
        spark.sparkContext.parallelize(range(120), 2).map(lambda x: time.sleep(1) or x).count()
    except Exception as exc:
        outcome.write_text(f"cancelled: {type(exc).__name__}")
        raise
    outcome.write_text("finished")
    return {}
