"""Producer and consumer processes for tests/bdre/test_broker.py and bench/broker.py: plain
kombu clients of the broker the Celery app is configured with (``CELERY_BROKER_URL``;
``BDRE_VAR_DIR`` picks the folders of the embedded one), one role per process.

    python -m tests.helpers.broker_clients produce PREFIX COUNT
    python -m tests.helpers.broker_clients consume OUT STOP   # until STOP exists and it is idle
    python -m tests.helpers.broker_clients hold OUT           # reads one message, never acks it
    python -m tests.helpers.broker_clients hold-and-fork OUT  # the same, then forks a child that
                                                           # lives on, pid in OUT.child

A consumer appends the id of every message it receives, and the time, to OUT, flushed,
before its ack. For the benchmark's comparisons, ``BROKER_CLIENT_TRANSPORT`` (a kombu
transport class) replaces the configured transport and ``BROKER_CLIENT_POLL`` sets the
seconds between polls of a polling transport.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from kombu import Connection, Exchange, Queue

ROOT = Path(__file__).resolve().parents[2]
EXCHANGE = Exchange("bdre-broker-test", type="direct")
QUEUE = Queue("bdre-broker-test", EXCHANGE, routing_key="bdre-broker-test")


def connection() -> Connection:
    from bdre.celery import app, ensure_broker_folders

    ensure_broker_folders()
    conn = app.connection_for_write(transport=os.environ.get("BROKER_CLIENT_TRANSPORT"))
    if poll := os.environ.get("BROKER_CLIENT_POLL"):
        # Not a transport option: the SQLAlchemy transport hands those to create_engine.
        conn.transport.polling_interval = float(poll)
    return conn


def produce(prefix: str, count: int) -> None:
    with connection() as conn:
        channel = conn.channel()
        QUEUE(channel).declare()
        producer = conn.Producer(channel, serializer="json")
        for i in range(count):
            producer.publish(
                {"id": f"{prefix}-{i}"}, exchange=EXCHANGE, routing_key=QUEUE.routing_key
            )


def consume(
    out: Path, stop: Path, *, ack: bool = True, limit: int | None = None, fork: bool = False
) -> None:
    received = 0
    with connection() as conn, out.open("a") as log:

        def on_message(body: dict, message) -> None:
            nonlocal received
            log.write(f"{body['id']} {time.time()}\n")
            log.flush()
            received += 1
            if ack:
                message.ack()

        channel = conn.channel()
        # Prefetch 1, as the workers (CELERY_WORKER_PREFETCH_MULTIPLIER).
        with conn.Consumer(
            [QUEUE], channel=channel, callbacks=[on_message], accept=["json"], prefetch_count=1
        ):
            while limit is None or received < limit:
                try:
                    conn.drain_events(timeout=0.25)
                except TimeoutError:
                    if stop.exists():
                        return
            if fork and os.fork() == 0:  # as a Celery worker forks a new pool process
                # Written whole, then renamed in: the test reads it once the name exists.
                part = Path(f"{out}.child.part")
                part.write_text(str(os.getpid()))
                part.replace(f"{out}.child")
            if not ack:
                time.sleep(3600)  # holds its messages unacknowledged until it is killed


class Clients:
    """Client processes of one broker, each with its log in ``folder``; ``kill_all`` at
    the end."""

    def __init__(self, folder: Path, env: dict[str, str]):
        self.folder = folder
        self.env = env
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, *args: str) -> subprocess.Popen:
        log = self.folder / f"client{len(self.procs)}-{args[0]}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.broker_clients", *args],
            cwd=ROOT,
            env=self.env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            # A group of its own: kill_all ends what it forked too, its parent killed or not.
            start_new_session=True,
        )
        self.procs.append((proc, log))
        return proc

    def log_of(self, proc: subprocess.Popen) -> str:
        return next(log for p, log in self.procs if p is proc).read_text()

    def wait_ok(self, proc: subprocess.Popen, timeout: float) -> None:
        rc = proc.wait(timeout)
        assert rc == 0, f"client {proc.args[3:]} ended with {rc}:\n{self.log_of(proc)[-4000:]}"

    def kill_all(self) -> None:
        for proc, _log in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def received(files: list[Path]) -> list[tuple[str, float]]:
    """(id, time received) of every message the consumers writing ``files`` received."""
    lines = (line.split() for f in files if f.exists() for line in f.read_text().splitlines())
    # A line being written as it is read is counted on the next read.
    return [(p[0], float(p[1])) for p in lines if len(p) == 2]


def ids_in(files: list[Path]) -> Counter[str]:
    return Counter(id_ for id_, _at in received(files))


def wait_until(condition: Callable[[], object], timeout: float, every: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return bool(condition())


def main(argv: list[str]) -> None:
    role, *args = argv
    if role == "produce":
        produce(args[0], int(args[1]))
    elif role == "consume":
        consume(Path(args[0]), Path(args[1]))
    elif role in ("hold", "hold-and-fork"):
        consume(Path(args[0]), Path("/nonexistent"), ack=False, limit=1, fork=role != "hold")
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
