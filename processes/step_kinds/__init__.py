"""Step kinds: the registry and the context a step's body receives.

A step's ``ProcessType.job_kind`` names its kind. Kinds are imported on first use, so that
nothing imports PySpark until a Spark step runs (the web process and the workers start
without it).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from processes.models import InstanceExec, Process, Property
from processes.steplog import StepLogger

Counters = dict[str, Any]
# A step kind's body: what runs for one step run, given its context; what it counted.
StepBody = Callable[["StepContext"], Counters]

# kind -> module that registers it
KIND_MODULES = {
    "ingest.scan": "processes.step_kinds.ingest_scan",
    "python.callable": "processes.step_kinds.python_callable",
    "spark.shred": "processes.step_kinds.spark_shred",
    "spark.load": "processes.step_kinds.spark_load",
    "spark.cleanse": "processes.step_kinds.spark_cleanse",
    "spark.sql": "processes.step_kinds.spark_sql",
    "spark.export": "processes.step_kinds.spark_export",
}
_REGISTRY: dict[str, StepBody] = {}


class UnknownKind(LookupError):
    pass


def register(kind: str) -> Callable[[StepBody], StepBody]:
    def decorate(body: StepBody) -> StepBody:
        _REGISTRY[kind] = body
        return body

    return decorate


def get(kind: str) -> StepBody:
    if kind not in _REGISTRY:
        module = KIND_MODULES.get(kind)
        if module is None:
            raise UnknownKind(f"no step kind {kind!r} is registered")
        importlib.import_module(module)
    return _REGISTRY[kind]


@dataclass
class StepContext:
    step: Process
    job_run_id: int
    step_run_id: int
    target_batch_id: int
    batch_ids: list[int]
    files: list[Any]  # lifecycle.FileInfo of the claimed batches
    options: dict[str, Any] = field(default_factory=dict)  # from the caller (CLI flags, ...)
    outputs: list[str] = field(default_factory=list)  # tables written so far (db.table)

    @property
    def log(self) -> StepLogger:
        return StepLogger(self.step, self.step_run_id)

    def properties(self, group: str) -> dict[str, str]:
        return dict(
            Property.objects.filter(process=self.step, config_group=group).values_list(
                "key", "value"
            )
        )


def run_step(context: StepContext) -> Counters:
    """Run the step's kind and store what it counted on the step's run."""
    kind = context.step.process_type.job_kind
    job = get(kind)
    with _session_for(kind, context):
        counters = job(context) or {}
    InstanceExec.objects.filter(pk=context.step_run_id).update(counters=counters)
    return counters


def _session_for(kind: str, context: StepContext) -> AbstractContextManager[object]:
    """A Spark step runs with its own Spark options on the worker's session; the other
    kinds never import PySpark."""
    if not kind.startswith("spark."):
        return nullcontext()
    from processes.step_kinds.spark_progress import logged_step_session

    return logged_step_session(context)


def cancel_running_work() -> None:
    """Cancel the Spark jobs of this worker process (a step whose run was terminated). Only
    when this process has a Spark session: it never starts one, nor imports PySpark."""
    session_module = sys.modules.get("processes.step_kinds.spark_session")
    if session_module is not None:
        session_module.cancel_all()
