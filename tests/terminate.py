"""A pytest plugin (``-p tests.terminate`` in pyproject.toml): SIGTERM stops a test process
as Ctrl-C does, so that the fixtures' teardown still runs and stops what they started.

The processes the tests start (Spark's standalone daemons, Celery workers, demos, notebooks,
broker clients) run in sessions of their own, so that a test can kill each one's whole group;
a signal sent to the test processes' group does not reach them. Python's default for SIGTERM
ends the process at once, without a ``finally`` block or a finalizer: a cancelled CI run (its
process group sent SIGTERM) left the cluster's JVMs running. pytest tears the session's
fixtures down on KeyboardInterrupt. pytest-xdist's controller, sent SIGTERM alone (``kill``
of its pid), passes it on to its test processes: it would otherwise kill them after a while,
before their teardown ends.

A process a test forks (a pool worker of the concurrency tests) is no test process: it gets
Python's default back, and SIGTERM ends it as it ends a real one. Python's handler, inherited,
made a pool's ``terminate()`` hang for ever: a worker sent SIGTERM while it was still being
forked lost the signal. So SIGTERM is blocked in the forking thread around each fork, the
child sets the default and then unblocks it: a signal sent meanwhile waits, and then ends the
child."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType

import pytest

from tests.helpers.proc import children


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Once: a second SIGTERM during the teardown must not cut it short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def _interrupt_with_test_processes(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for pid in children(os.getpid()):
        with contextlib.suppress(ProcessLookupError):  # a test process just gone
            os.kill(pid, signal.SIGTERM)
    raise KeyboardInterrupt(f"signal {signum}")


# Each forking thread's signal mask before the fork (a child's one thread keeps the forking
# thread's ident): put back as it was, SIGTERM blocked only where it was before.
_masks: dict[int, set[signal.Signals]] = {}


def _block() -> None:
    _masks[threading.get_ident()] = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _restore() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, _masks.pop(threading.get_ident()))


def _default_in_child() -> None:
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    finally:
        _restore()


def pytest_configure(config: pytest.Config) -> None:
    # Only the main thread may set a handler, and only it receives the signal.
    if threading.current_thread() is not threading.main_thread():
        return
    os.register_at_fork(before=_block, after_in_parent=_restore, after_in_child=_default_in_child)
    controller = bool(config.getoption("numprocesses", None)) and not hasattr(config, "workerinput")
    signal.signal(signal.SIGTERM, _interrupt_with_test_processes if controller else _interrupt)
