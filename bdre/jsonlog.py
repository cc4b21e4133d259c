"""Structured logs (docs/operations.md, "Metrics, JSON logs and Flower").

``BDRE_LOG_FORMAT=json`` writes one JSON object per line instead of text, for a log shipper
(Loki, Elasticsearch, CloudWatch) to index. Every line logged while a step runs carries the
job run's and the step run's ids, whichever logger wrote it (BDRE's, Celery's, a callable's),
so that a search for one run finds all of its lines across workers. The ids live in a context
variable that the orchestrator sets around a step's execution (:func:`run_context`); a filter
on the console handler copies them onto each record, and both formats can use them.

The ids are plain integers: this module knows nothing of the apps that set them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

# (job run id, step run id) of the step this thread is running, if any.
_RUN_IDS: ContextVar[tuple[int | None, int | None]] = ContextVar(
    "bdre_run_ids", default=(None, None)
)


@contextmanager
def run_context(run_id: int | None, step_run_id: int | None = None) -> Iterator[None]:
    """Every line logged inside the block carries these run and step run ids."""
    token = _RUN_IDS.set((run_id, step_run_id))
    try:
        yield
    finally:
        _RUN_IDS.reset(token)


def current_ids() -> tuple[int | None, int | None]:
    return _RUN_IDS.get()


class RunIdsFilter(logging.Filter):
    """Puts ``run_id`` and ``step_run_id`` on every record (None outside a step run). Never
    drops a record. On the handler, not a logger: a logger's filters do not see the records
    its children propagate."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id, step_run_id = _RUN_IDS.get()
        # A record made in another context (handed over by a queue) keeps the ids it has.
        if getattr(record, "run_id", None) is None:
            record.run_id = run_id
        if getattr(record, "step_run_id", None) is None:
            record.step_run_id = step_run_id
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, process id,
    the run ids, and the traceback of an exception as one string."""

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "run_id", None) is None and getattr(record, "step_run_id", None) is None:
            # A handler configured without RunIdsFilter still gets the ids.
            record.run_id, record.step_run_id = _RUN_IDS.get()
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
            "run_id": getattr(record, "run_id", None),
            "step_run_id": getattr(record, "step_run_id", None),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: a message argument that JSON cannot hold is written as its text, not
        # lost with the line.
        return json.dumps(entry, default=str, ensure_ascii=False)
