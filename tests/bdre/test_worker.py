"""bdre.worker: the Celery worker `make demo`, the tests and the benchmarks start as a child."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STARTER = """
import os, sys, time
from pathlib import Path
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bdre.settings")
django.setup()
from bdre.worker import start_worker
worker = start_worker(Path(sys.argv[1]), beat=False, concurrency=1)
print(worker.pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie has exited, whoever reaps it


@pytest.mark.worker
@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_worker_stops_when_the_process_that_started_it_is_killed(tmp_path):
    # A timed-out `manage.py demo --run` is killed outright: its worker, in a process group
    # of its own, would otherwise keep running (and claiming work) long after.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["BDRE_VAR_DIR"] = str(tmp_path / "var")
    log = tmp_path / "worker.log"
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(log)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    worker_pid = int(starter.stdout.readline())
    try:
        deadline = time.monotonic() + 90
        while "ready" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
            assert alive(worker_pid), log.read_text()
            time.sleep(0.5)

        starter.kill()
        starter.wait()

        deadline = time.monotonic() + 60
        while alive(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not alive(worker_pid), "the worker outlived the process that started it"
    finally:
        starter.kill()
        if alive(worker_pid):
            os.killpg(worker_pid, 9)
