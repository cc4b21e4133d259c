"""A Celery worker in a child process of its own, as ``make demo``, the tests and the
orchestration benchmark start one: both queues, optionally Beat, its own process group."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings


def start_worker(
    log: Path,
    *,
    beat: bool = True,
    concurrency: int = 2,
    name: str | None = None,
    loglevel: str = "INFO",
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """``celery -A bdre worker`` on the default and the Spark queue, writing to ``log``. In
    a process group of its own, so that ``stop_worker`` (or a kill of the group) also ends
    its pool processes and the Spark JVMs they started."""
    argv = [sys.executable, "-m", "celery", "-A", "bdre", "worker"]
    argv += ["-B"] if beat else []
    # Embedded (one machine): every queue, a step's own Spark queue too.
    argv += ["-Q", ",".join([settings.BDRE_QUEUE, *settings.BDRE_SPARK_QUEUES])]
    argv += ["--concurrency", str(concurrency), "--loglevel", loglevel]
    argv += ["-n", name] if name else []
    # Workers started together need not exchange state at start-up; it only slows them.
    argv += ["--without-gossip", "--without-mingle"]
    return subprocess.Popen(
        argv,
        cwd=Path(settings.BASE_DIR),
        env=env,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=functools.partial(_die_with_parent, os.getpid()),
    )


def _die_with_parent(parent: int) -> None:
    # The worker leads a process group of its own, so a kill of its parent's group (a test's
    # timeout kills `manage.py demo`, a Ctrl-C, the OOM killer) would leave it and its Spark
    # JVMs running, claiming the next run's work. Linux tells it when its parent dies: it
    # then takes the SIGTERM of a warm shutdown.
    if sys.platform == "linux":
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it died before the request: nobody would tell
            os._exit(1)


def stop_worker(worker: subprocess.Popen, timeout: float = 30) -> None:
    """A warm shutdown of the worker (running tasks finish, for ``timeout`` seconds), then
    whatever is left of its process group."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(10)
