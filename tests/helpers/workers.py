"""A real Celery worker with Beat, in its own process group, on the test database and the
configured broker (the filesystem broker by default, Redis when CELERY_BROKER_URL says so)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection

from bdre.worker import start_worker, stop_worker


def database_url() -> str:
    """The URL of the test database this process uses, for the worker."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def purge_broker() -> None:
    """Drop messages left by an earlier test run from both queues."""
    from bdre.celery import app, ensure_broker_folders

    ensure_broker_folders()
    with app.connection_for_write() as conn:
        for queue in (settings.BDRE_QUEUE, settings.BDRE_SPARK_QUEUE):
            # A queue never declared has nothing to purge.
            with contextlib.suppress(Exception):
                conn.default_channel.queue_purge(queue)


class Worker:
    def __init__(self, log: Path, env: dict[str, str]):
        self.log = log
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> Worker:
        self.proc = start_worker(self.log, env=self.env)
        return self

    def kill(self) -> None:
        """SIGKILL the worker, its pool children and any JVM they started: a crash."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc:
            stop_worker(self.proc)

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def worker_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "BDRE_VAR_DIR": str(settings.VAR_DIR),  # the same broker folders as this process
            "BDRE_WAREHOUSE": str(settings.BDRE_WAREHOUSE),
            "BDRE_LANDING": str(settings.BDRE_LANDING),
            "BDRE_HEARTBEAT_SECONDS": "1",
            "BDRE_REAPER_SECONDS": "2",
            "SPARK_MASTER": "local[1]",
            "SPARK_DRIVER_MEMORY": "1g",
            "SPARK_SHUFFLE_PARTITIONS": "2",
            "DEBUG": "true",
        }
    )
    env.update(extra)
    return env


def wait_for(condition: Callable[[], object], timeout: float, what: str, worker: Worker):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(
        f"timed out after {timeout} s waiting for {what}\n{worker.output()[-6000:]}"
    )
