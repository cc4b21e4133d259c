"""Shared helpers of the benchmarks: a fresh database per backend, timing, the results file."""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "benchmarks.md"
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({cpu}){memory}, Python {platform.python_version()}"


def fresh_database(backend: str, name: str) -> str:
    """A DATABASE_URL for an empty database of ``backend`` named after the benchmark."""
    if backend == "sqlite":
        path = ROOT / "var" / "bench" / f"{name}.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"
    import psycopg2

    admin = psycopg2.connect(PG_ADMIN_URL)
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "bench_{name}" WITH (FORCE)')
        cursor.execute(f'CREATE DATABASE "bench_{name}"')
    admin.close()
    return f"postgres://postgres@127.0.0.1:5432/bench_{name}"


def run_child(
    script: Path, database_url: str, args: list[str], *, env_extra: dict[str, str] | None = None
) -> dict:
    """Run the benchmark body in its own interpreter (one Django set-up per database); it
    prints its results as JSON on its last line. The broker is the embedded one unless
    ``env_extra`` (added to this process's environment) names another."""
    env = dict(os.environ, DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="bdre.settings")
    env.pop("CELERY_BROKER_URL", None)
    env.update(env_extra or {})
    return run_json([sys.executable, str(script), *args], env)


def run_json(command: list[str], env: dict[str, str], *, timeout: float = 3600) -> dict:
    """Run a benchmark's child in its own process group, so that what it started (a Celery
    worker, a JVM) is killed with it on an error, a timeout or Ctrl-C; its last line of
    output is its result as JSON."""
    child = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, _ = child.communicate(timeout=timeout)
    except BaseException:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, command)
    result: dict = json.loads(out.strip().splitlines()[-1])
    return result


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1000, "p95_ms": p95 * 1000}


def append_results(title: str, command: str, body: str) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if not RESULTS.exists():
        RESULTS.write_text(
            "# Benchmarks\n\nEach section is appended by a script under `bench/`; newest last.\n"
        )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    # A script run without arguments is still named without a trailing space.
    command = command.strip()
    with RESULTS.open("a") as f:
        f.write(f"\n## {title} ({stamp})\n\nMachine: {machine()}\n\nCommand: `{command}`\n\n")
        f.write(body.rstrip() + "\n")
