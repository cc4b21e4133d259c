"""Broker benchmark: the embedded broker against kombu's own filesystem transport, kombu's
SQLAlchemy transport on SQLite, and Redis, with several producer and consumer processes.

    .venv/bin/python bench/broker.py [--setups embedded,kombu-filesystem,sqlalchemy,redis]
        [--producers 3] [--consumers 3] [--messages 3000] [--no-write]

For each setup: ``--consumers`` consumer processes and ``--producers`` producer processes
(tests/helpers/broker_clients.py, prefetch 1, an ack per message, polls every 0.1 s) exchange
``--messages`` messages through a queue declared beforehand; the table gives messages a
second from the first receipt to the last, the messages not delivered (lost, or left in the
queue by consumers that crashed) and delivered twice, and the clients that crashed. Then, on
an empty broker, one consumer reads a message and is SIGKILLed before its ack, and another
consumer waits 10 s for the message. The ``sqlalchemy`` setup needs SQLAlchemy importable (it
is no dependency of BDRE: ``pip install --target DIR SQLAlchemy`` and ``PYTHONPATH=DIR``).
Prints a table and appends it to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, append_results
from tests.helpers.broker_clients import Clients, ids_in, received, wait_until

REDIS_URL = "redis://127.0.0.1:6379/14"
SETUPS = {
    "embedded": "filesystem:// (bdre.broker)",
    "kombu-filesystem": "filesystem:// (kombu's transport)",
    "sqlalchemy": "sqla+sqlite:// (kombu's SQLAlchemy transport)",
    "redis": "redis://",
}


def env_of(setup: str, var: Path) -> dict[str, str]:
    env = dict(os.environ, BDRE_VAR_DIR=str(var), DEBUG="true", BROKER_CLIENT_POLL="0.1")
    env["CELERY_BROKER_URL"] = "filesystem://"
    if setup == "kombu-filesystem":
        env["BROKER_CLIENT_TRANSPORT"] = "kombu.transport.filesystem:Transport"
    elif setup == "sqlalchemy":
        env["CELERY_BROKER_URL"] = f"sqla+sqlite:///{var / 'broker.sqlite3'}"
    elif setup == "redis":
        env["CELERY_BROKER_URL"] = REDIS_URL
    return env


def exchange(clients: Clients, folder: Path, producers: int, consumers: int, messages: int):
    each = messages // producers
    stop = folder / "stop"
    outs = [folder / f"received{i}" for i in range(consumers)]
    readers = [clients.start("consume", str(out), str(stop)) for out in outs]
    writers = [clients.start("produce", f"p{i}", str(each)) for i in range(producers)]
    for w in writers:
        w.wait(300)
    expected = {f"p{i}-{n}" for i in range(producers) for n in range(each)}
    # Done when every message arrived, or when nothing arrived for 10 s (some were lost).
    last = [0, time.monotonic()]

    def settled() -> bool:
        count = len(received(outs))
        if count != last[0]:
            last[:] = [count, time.monotonic()]
        return count >= len(expected) or time.monotonic() - last[1] > 10

    wait_until(settled, 600, every=0.2)
    stop.touch()
    for r in readers:
        try:
            r.wait(30)
        except Exception:
            r.kill()
    got = ids_in(outs)
    times = [at for _id, at in received(outs)]
    crashed = sum(p.returncode != 0 for p in (*readers, *writers))
    return {
        "messages": len(expected),
        "per_second": len(times) / (max(times) - min(times)) if len(times) > 1 else 0.0,
        "lost": len(expected - set(got)),
        "twice": sum(1 for n in got.values() if n > 1),
        "crashed": crashed,
    }


def after_sigkill(clients: Clients, folder: Path) -> str:
    clients.start("produce", "lonely", "1").wait(60)
    held, again, stop = folder / "held", folder / "again", folder / "stop-again"
    holder = clients.start("hold", str(held))
    if not wait_until(lambda: "lonely-0" in ids_in([held]), 30):
        return "not read"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(10)
    killed = time.monotonic()
    reader = clients.start("consume", str(again), str(stop))
    back = wait_until(lambda: "lonely-0" in ids_in([again]), 10)
    took = time.monotonic() - killed
    stop.touch()
    reader.wait(30)
    return f"yes, {took:.1f} s" if back else "no (10 s)"


def fresh(setup: str, name: str) -> Clients:
    """Clients of an empty broker, its queue declared: kombu's SQLAlchemy transport creates
    its tables and queue rows on first use, and processes that do so together crash ("table
    kombu_queue already exists", "UNIQUE constraint failed: kombu_queue.name")."""
    folder = ROOT / "var" / "bench" / f"broker-{setup}" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if setup == "redis":
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
    clients = Clients(folder, env_of(setup, folder / "var"))
    clients.wait_ok(clients.start("produce", "declare", "0"), 60)
    return clients


def run(setup: str, args) -> dict:
    both = []
    try:
        both.append(fresh(setup, "exchange"))
        result = exchange(both[0], both[0].folder, args.producers, args.consumers, args.messages)
        both.append(fresh(setup, "sigkill"))
        result["after_sigkill"] = after_sigkill(both[1], both[1].folder)
    finally:
        for clients in both:
            clients.kill_all()
        if setup == "redis":
            import redis

            redis.Redis.from_url(REDIS_URL).flushdb()  # the killed consumer's message
    return result


def report(results: dict[str, dict], args) -> str:
    lines = [
        f"{args.producers} producer and {args.consumers} consumer processes exchange "
        f"{args.messages} messages (prefetch 1, an ack each, polls every 0.1 s); then a "
        "consumer is SIGKILLed after reading a message, before its ack, and another waits 10 s "
        "for that message.",
        "",
        "| broker | messages | messages/s | not delivered | delivered twice | clients crashed "
        "| back after SIGKILL |",
        "|---|---|---|---|---|---|---|",
    ]
    for setup, r in results.items():
        lines.append(
            f"| {SETUPS[setup]} | {r['messages']} | {r['per_second']:.0f} | {r['lost']} "
            f"| {r['twice']} | {r['crashed']} | {r['after_sigkill']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setups", default="embedded,kombu-filesystem,sqlalchemy,redis")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    results = {}
    for setup in args.setups.split(","):
        if setup == "sqlalchemy" and importlib.util.find_spec("sqlalchemy") is None:
            print("sqlalchemy: SQLAlchemy is not importable, skipped", file=sys.stderr)
            continue
        results[setup] = run(setup, args)
        print(setup, results[setup], file=sys.stderr)
    table = report(results, args)
    print(table)
    if not args.no_write:
        command = "python bench/broker.py " + " ".join(sys.argv[1:])
        append_results("Broker: several producers and consumers", command, table)


if __name__ == "__main__":
    main()
