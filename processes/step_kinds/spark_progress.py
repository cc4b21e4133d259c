"""What a Spark step's log says of its Spark work (docs/operations.md, "Step logs"): the
application, and its jobs and stages as they progress.

The driver's own log (log4j, in the JVM) never passes through Python logging, and the JVM
writes it to the process's stderr for every step at once, so it is not a step's to capture.
What a step can reach is logged instead, through Python logging, which the step's log file
receives (``processes.logfiles``):

- on a classic session, the step's Spark jobs are put in a job group of their own, and a
  thread reads the status tracker every few seconds: each job's state and each stage's tasks
  (done, running, failed), once more when the step ends, so that a short job is there too;
- through Spark Connect, the client has no status tracker: the server reports the progress of
  each operation's stages, which a progress handler logs.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from processes.step_kinds import StepContext
from processes.step_kinds.spark_session import application_id, is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("bdre.spark")
POLL_SECONDS = 2.0


@contextmanager
def progress_logged(spark: SparkSession, context: StepContext) -> Iterator[None]:
    log.info("Spark application %s", application_id(spark) or "(unknown)")
    if is_connect(spark):
        with _connect_progress(spark):
            yield
        return
    sc = spark.sparkContext
    group = f"bdre-step-run-{context.step_run_id}"
    sc.setJobGroup(group, f"{context.step.name} (run {context.job_run_id})")
    watcher = _StatusWatcher(sc.statusTracker(), group)
    # The thread writes into the step's log: it runs in a copy of the step's context.
    thread = threading.Thread(
        target=contextvars.copy_context().run,
        args=(watcher.run,),
        name="bdre-spark-progress",
        daemon=True,
    )
    thread.start()
    try:
        yield
    finally:
        watcher.stop.set()
        thread.join()
        watcher.poll()
        # The worker's session runs the next step in this thread: not in this step's group.
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


class _StatusWatcher:
    def __init__(self, tracker: Any, group: str):
        self.tracker = tracker
        self.group = group
        self.stop = threading.Event()
        self._said: dict[tuple[str, int], tuple[Any, ...]] = {}
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self.stop.wait(POLL_SECONDS):
            try:
                self.poll()
            except Exception as exc:  # the session stopped under the step: the step says why
                log.debug("Spark status not read: %s", exc)
                return

    def poll(self) -> None:
        with self._lock:
            for job_id in sorted(self.tracker.getJobIdsForGroup(self.group)):
                job = self.tracker.getJobInfo(job_id)
                if job is None:
                    continue
                stage_ids = sorted(job.stageIds)
                stages = ", ".join(map(str, stage_ids))
                self._say(
                    ("job", job_id),
                    (job.status,),
                    "Spark job %s %s (stages %s)",
                    job_id,
                    job.status,
                    stages,
                )
                for stage_id in stage_ids:
                    stage = self.tracker.getStageInfo(stage_id)
                    if stage is None:  # skipped (its output was reused) or not retained
                        continue
                    self._say(
                        ("stage", stage_id),
                        (stage.numCompletedTasks, stage.numActiveTasks, stage.numFailedTasks),
                        "Spark stage %s (%s): %s/%s tasks done, %s running, %s failed",
                        stage_id,
                        stage.name,
                        stage.numCompletedTasks,
                        stage.numTasks,
                        stage.numActiveTasks,
                        stage.numFailedTasks,
                    )

    def _say(self, key: tuple[str, int], state: tuple[Any, ...], *message: Any) -> None:
        if self._said.get(key) != state:
            self._said[key] = state
            log.info(*message)


@contextmanager
def _connect_progress(spark: SparkSession) -> Iterator[None]:
    said: dict[tuple[str | None, int], tuple[int, bool]] = {}

    def handler(stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
        for stage in stages or []:
            state = (stage.num_completed_tasks, stage.done)
            if said.get((operation_id, stage.stage_id)) != state:
                said[(operation_id, stage.stage_id)] = state
                log.info(
                    "Spark stage %s of operation %s: %s/%s tasks done%s",
                    stage.stage_id,
                    operation_id,
                    stage.num_completed_tasks,
                    stage.num_tasks,
                    ", finished" if stage.done else "",
                )

    session: Any = spark
    session.registerProgressHandler(handler)
    try:
        yield
    finally:
        session.removeProgressHandler(handler)


@contextmanager
def logged_step_session(context: StepContext) -> Iterator[SparkSession]:
    """``spark_io.step_session`` with the step's Spark work logged."""
    from processes.step_kinds.spark_io import step_session

    with step_session(context) as spark, progress_logged(spark, context):
        yield spark
