"""Step bodies for the orchestration tests (``python.callable`` steps name them)."""

from __future__ import annotations

import time
from pathlib import Path

from processes.step_kinds import StepContext


def sleep(context: StepContext) -> dict:
    seconds = float(context.properties("test").get("sleep", "0"))
    time.sleep(seconds)
    return {"slept": seconds}


def fail_until_flag(context: StepContext) -> dict:
    """Fails until the file named by ``test.flag`` exists."""
    flag = Path(context.properties("test")["flag"])
    if not flag.exists():
        raise RuntimeError(f"{flag.name} is not there yet")
    return {"flag": flag.name}


def slow_spark_job(context: StepContext) -> dict:
    """A Spark job of a minute; writes to ``test.outcome`` whether it finished or was
    cancelled."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    from processes.step_kinds.spark_io import start
    from processes.step_kinds.spark_session import get_spark

    outcome = Path(context.properties("test")["outcome"])
    spark = get_spark()
    start(context, spark)
    # Through the DataFrame API (a Python UDF), which a Spark Connect session has too.
    slow = udf(lambda x: time.sleep(1) or x, "long")
    try:
        spark.range(0, 120, 1, 2).select(F.sum(slow("id"))).collect()
    except Exception as exc:
        outcome.write_text(f"cancelled: {type(exc).__name__}")
        raise
    outcome.write_text("finished")
    return {}


def spark_context_user(context: StepContext) -> dict:
    """A step body written for a driver in the worker: it reaches for the SparkContext, which
    a Spark Connect session does not have."""
    from processes.step_kinds.spark_session import get_spark

    return {"parallelism": get_spark().sparkContext.defaultParallelism}


def talk_and_fail(context: StepContext) -> dict:
    """Logs, prints and fails: what a step's log keeps (``test.words`` is said each way)."""
    import logging
    import sys

    words = context.properties("test").get("words", "hello")
    logging.getLogger("tests.processes.callables").info("logged %s", words)
    print(f"printed {words}")
    print(f"complained {words}", file=sys.stderr)
    raise ValueError(f"no good {words}")


def log_a_line(context: StepContext) -> dict:
    """Says something through Python's logging, as any step body's library would."""
    import logging

    logging.getLogger("tests.step_body").warning("working on batch %s", context.target_batch_id)
    return {}


def talk_until_flag(context: StepContext) -> dict:
    """Says a line, waits (up to a minute) for the file ``test.flag``, says another: a step
    whose log grows while someone watches its run."""
    print("first line, before the flag", flush=True)
    flag = Path(context.properties("test")["flag"])
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    print("second line, the flag is there", flush=True)
    return {"waited": 1}


def terminated_while_working(context: StepContext) -> dict:
    """Its run is terminated (as a user would, from the page) while it works; it stops once
    its work is cancelled, as a Spark job would: when the file ``test.flag`` appears, the
    test's stand-in for the cancellation of this process's Spark work."""
    from processes import lifecycle

    flag = Path(context.properties("test")["flag"])
    job_id = context.step.parent_id
    assert job_id is not None
    lifecycle.term_job(job_id, "terminated by a user", instance_exec_id=context.job_run_id)
    deadline = time.monotonic() + 60
    while not flag.exists():
        if time.monotonic() > deadline:
            return {}  # never cancelled: the step succeeds, which the test fails on
        time.sleep(0.01)
    raise RuntimeError("cancelled")
