"""The log file of each step run (docs/operations.md, "Step logs").

A step run's file is ``<BDRE_LOG_DIR>/run-<job run id>/step-<step run id>.log``: found from
the run's ids alone, so nothing about it is stored in the database. While the step runs,
:func:`capture` makes that file the destination of everything the step's thread says:
every Python log record (BDRE's, the callable's, PySpark's), what it prints on stdout and
stderr, the Spark progress lines of ``processes.step_kinds.spark_progress``, and the traceback
that ends a failed step. The destination is a context variable, so two steps running in
threads of one worker never write into each other's file.

A file never grows past ``BDRE_STEP_LOG_MAX_BYTES``: past it, the middle is cut (the head,
where the step said what it was doing, and the tail, where it failed, are kept) and a line
says how much went. Beat deletes the files older than ``BDRE_STEP_LOG_RETENTION_DAYS``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django_celery_beat.models import PeriodicTask

from bdre.beat import ensure_interval_task
from processes.models import InstanceExec

log = logging.getLogger(__name__)

PURGE_NAME = "bdre-step-log-retention"
PURGE_TASK = "processes.tasks.purge_step_logs"
PURGE_EVERY_SECONDS = 3600
CUT_MARKER = "[bdre] ... {cut} bytes cut here (BDRE_STEP_LOG_MAX_BYTES) ..."
SMALLEST_BOUND = 4096  # below it a head and a tail hold nothing useful
# The lines spark_progress writes, as FORMAT gives them: "... INFO bdre.spark: Spark stage 3
# (...): 2/2 tasks done ...", "... Spark job 1 SUCCEEDED ...", "... Spark stage 5 of operation".
PROGRESS = re.compile(r" INFO bdre\.spark: Spark (?:job|stage) \d")
FAILURE = re.compile(r" FAILED\b|, [1-9]\d* failed$")
FORMAT = logging.Formatter(
    "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"
)


def log_path(job_run_id: int, step_run_id: int) -> Path:
    return Path(settings.BDRE_LOG_DIR) / f"run-{job_run_id}" / f"step-{step_run_id}.log"


# --- writing -------------------------------------------------------------------------------


class StepLogFile:
    """One step run's file, appended to line by line and kept under ``max_bytes``."""

    def __init__(self, path: Path, max_bytes: int):
        self.path = path
        self.max_bytes = max(max_bytes, SMALLEST_BOUND)
        self._lock = threading.Lock()
        self._head: int | None = None  # bytes kept at the start, once a cut was made
        self._marker = b""
        self._cut = 0
        self._partial: dict[str, str] = {}  # a stream's line not ended yet
        self._file = self._open()
        self._size = self._file.tell()

    def _open(self) -> Any:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self.path.open("ab")
        except FileNotFoundError:  # the purge removed the empty folder in between
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self.path.open("ab")

    def write(self, text: str) -> None:
        """Append ``text`` as one or more whole lines."""
        data = text.encode("utf-8", "replace")
        longest = self.max_bytes // 4
        if len(data) > longest:
            data = data[:longest] + b" [bdre] ... line cut\n"
        if not data.endswith(b"\n"):
            data += b"\n"
        with self._lock:
            if self._file.closed:
                return
            self._file.write(data)
            self._file.flush()  # the page's live tail reads the file as it grows
            self._size += len(data)
            if self._size > self.max_bytes:
                self._cut_middle()

    def write_stream(self, name: str, text: str) -> None:
        """What the step printed on ``name`` (stdout, stderr), by whole lines."""
        pending = self._partial.get(name, "") + text
        *lines, rest = pending.split("\n")
        self._partial[name] = rest
        for line in lines:
            self.write(f"{_now()} {name}: {line}")

    def _cut_middle(self) -> None:
        """Keep the first half and the last quarter of the bound, cut at line ends, with a
        line saying what went: the file is rewritten about every quarter of the bound."""
        self._file.close()
        data = self.path.read_bytes()
        if self._head is None:
            end = data.rfind(b"\n", 0, self.max_bytes // 2) + 1
            self._head = end or self.max_bytes // 2
            rest = data[self._head :]
        else:
            rest = data[self._head + len(self._marker) :]
        tail = rest[-(self.max_bytes // 4) :]
        start = tail.find(b"\n") + 1
        if len(tail) < len(rest) and 0 < start < len(tail):
            tail = tail[start:]
        self._cut += len(rest) - len(tail)
        self._marker = (CUT_MARKER.format(cut=self._cut) + "\n").encode()
        kept = data[: self._head] + self._marker + tail
        scratch = self.path.with_suffix(".cut")
        scratch.write_bytes(kept)
        os.replace(scratch, self.path)  # a reader sees the old file or the new, never half
        self._file = self._open()
        self._size = len(kept)

    def close(self) -> None:
        for name, rest in list(self._partial.items()):
            if rest:
                self.write(f"{_now()} {name}: {rest}")
        self._partial.clear()
        with self._lock:
            self._file.close()


_current: ContextVar[StepLogFile | None] = ContextVar("bdre_step_log", default=None)


def current() -> StepLogFile | None:
    """The file of the step running in this context, if any."""
    return _current.get()


class _StepLogHandler(logging.Handler):
    """On the root logger: a record goes to the file of the step its context runs, if any."""

    def emit(self, record: logging.LogRecord) -> None:
        target = _current.get()
        if target is None:
            return
        try:
            target.write(FORMAT.format(record))
        except Exception:
            self.handleError(record)


class _StepStream:
    """In place of ``sys.stdout`` or ``sys.stderr``: inside a step, what is written goes to
    the step's file; elsewhere, and for every other use of the stream, to the stream it
    replaced."""

    def __init__(self, name: str, stream: TextIO):
        self._name = name
        self._stream = stream

    def write(self, text: str) -> int:
        target = _current.get()
        if target is None:
            return self._stream.write(text)
        target.write_stream(self._name, text)
        return len(text)

    def flush(self) -> None:
        if _current.get() is None:
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_installed = threading.Lock()
_handler = _StepLogHandler()


def _install() -> None:
    """The handler and the stream proxies, once per process (again if someone, such as a test
    runner's capture, put its own streams back since)."""
    with _installed:
        root = logging.getLogger()
        if _handler not in root.handlers:
            root.addHandler(_handler)
        if not isinstance(sys.stdout, _StepStream):
            sys.stdout = _StepStream("stdout", sys.stdout)
        if not isinstance(sys.stderr, _StepStream):
            sys.stderr = _StepStream("stderr", sys.stderr)


@contextmanager
def capture(job_run_id: int, step_run_id: int, step_name: str) -> Iterator[StepLogFile]:
    """Everything the step says in this context, into its file; a failure's whole traceback
    (its causes included) closes the file."""
    _install()
    target = StepLogFile(log_path(job_run_id, step_run_id), settings.BDRE_STEP_LOG_MAX_BYTES)
    token = _current.set(target)
    started = time.monotonic()
    step_log = logging.getLogger("bdre.step")
    step_log.info("step %s started (job run %s, step run %s)", step_name, job_run_id, step_run_id)
    try:
        yield target
    except BaseException as exc:
        seconds = time.monotonic() - started
        target.write(f"{_now()} ERROR bdre.step: step {step_name} failed after {seconds:.1f} s")
        target.write("".join(traceback.format_exception(exc)))
        raise
    else:
        seconds = time.monotonic() - started
        step_log.info("step %s finished in %.1f s", step_name, seconds)
    finally:
        _current.reset(token)
        target.close()


def _now() -> str:
    """Now as the log records' lines write it (local time, milliseconds)."""
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


# --- reading -------------------------------------------------------------------------------


@dataclass
class StepLog:
    """A step run's log as a reader asked for it: every line, the lines matching ``q``
    (case-insensitive), or the last ``tail`` of those."""

    step_run: InstanceExec
    lines: list[str] = field(default_factory=list)
    total_lines: int = 0
    matched: int = 0
    size: int = 0
    cut: bool = False  # the middle was cut by the bound
    exists: bool = False
    progress_hidden: int = 0  # Spark's progress lines left out (``progress=False``)

    @property
    def shown_all(self) -> bool:
        return len(self.lines) == self.matched


def step_runs_of(run: InstanceExec) -> list[InstanceExec]:
    """The step runs whose logs a run has: a job run's, in the order they started, or the
    step run itself."""
    if run.parent_id is not None:
        return [run]
    return list(
        InstanceExec.objects.filter(parent=run)
        .select_related("process", "exec_state")
        .order_by("id")
    )


def is_progress(line: str) -> bool:
    """A line of Spark's progress (processes/step_kinds/spark_progress.py): its jobs and
    stages as they advance, most of a Spark step's lines; not one that tells of a failure
    (a job FAILED, a stage with failed tasks), which explains the step's error."""
    return PROGRESS.search(line) is not None and FAILURE.search(line) is None


def read(
    step_run: InstanceExec, *, q: str = "", tail: int | None = None, progress: bool = True
) -> StepLog:
    """The step run's lines, without Spark's progress unless ``progress``, filtered by ``q``
    and cut to the last ``tail``."""
    found = StepLog(step_run=step_run)
    if step_run.parent_id is None:
        return found
    path = log_path(step_run.parent_id, step_run.pk)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return found
    text = data.decode("utf-8", "replace")
    lines = text.splitlines()
    found.exists, found.size, found.total_lines = True, len(data), len(lines)
    marker = CUT_MARKER.split("{cut}")[0]
    found.cut = any(line.startswith(marker) for line in lines)
    if not progress:
        kept = [line for line in lines if not is_progress(line)]
        found.progress_hidden = len(lines) - len(kept)
        lines = kept
    if q:
        needle = q.casefold()
        lines = [line for line in lines if needle in line.casefold()]
    found.matched = len(lines)
    found.lines = lines[-tail:] if tail else lines
    return found


def read_all(
    run: InstanceExec, *, q: str = "", tail: int | None = None, step_run_id: int | None = None
) -> list[StepLog]:
    """The logs of the run's step runs (only ``step_run_id``'s if given: none if it is not
    one of them)."""
    return [
        read(step_run, q=q, tail=tail)
        for step_run in step_runs_of(run)
        if step_run_id is None or step_run.pk == step_run_id
    ]


def as_text(logs: Sequence[StepLog]) -> str:
    """The logs as one text file, each step's under a line naming it."""
    parts = []
    for step_log in logs:
        step = step_log.step_run
        parts.append(f"==== step {step.process.name} (step run {step.pk}) ====\n")
        parts.extend(line + "\n" for line in step_log.lines)
    return "".join(parts)


# --- retention -----------------------------------------------------------------------------


def purge_expired(now: float | None = None) -> int:
    """Delete the step log files last written more than ``BDRE_STEP_LOG_RETENTION_DAYS`` ago
    (never when it is 0), and the run folders left empty. Returns how many files went."""
    days = settings.BDRE_STEP_LOG_RETENTION_DAYS
    root = Path(settings.BDRE_LOG_DIR)
    if days <= 0 or not root.is_dir():
        return 0
    cutoff = (now if now is not None else time.time()) - days * 86400
    removed = 0
    for run_dir in root.glob("run-*"):
        for path in run_dir.glob("step-*.log"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # only when empty
    if removed:
        log.info("deleted %s step log files older than %s days", removed, days)
    return removed


def ensure_purge_schedule() -> PeriodicTask:
    """Beat's hourly purge of expired step logs (idempotent)."""
    return ensure_interval_task(PURGE_NAME, PURGE_TASK, PURGE_EVERY_SECONDS)
