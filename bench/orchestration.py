"""Orchestration benchmark: the overhead BDRE adds around the work of a job.

    .venv/bin/python bench/orchestration.py [--setups embedded,redis] [--runs 30]
        [--jobs 40] [--no-write]

A job of 5 no-op steps (``python.callable`` without a function), run by real Celery workers:

- latency: from queuing ``run_process`` to ``halt_job`` (the run's end time), one job at a
  time, median and p95 over ``--runs`` runs;
- throughput: ``--jobs`` different jobs queued at once, jobs per minute until the last one
  halted.

Setups: ``embedded`` (filesystem broker, SQLite) and ``redis`` (Redis broker, PostgreSQL).
Each has 2 worker processes (``celery worker --concurrency 1``, twice) and its own fresh
database. Prints a table and appends it to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, append_results, fresh_database, run_child, summary

REDIS_URL = "redis://127.0.0.1:6379/15"


def child(runs: int, jobs: int) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from bdre.celery import ensure_broker_folders
    from bdre.worker import start_worker, stop_worker
    from processes import tasks
    from processes.models import BusDomain, ExecState, InstanceExec
    from processes.registry import StepSpec, create_job

    call_command("migrate", verbosity=0)
    ensure_broker_folders()
    team = Group.objects.create(name="bench")
    app = BusDomain.objects.create(name="bench", team=team)

    def job(name: str):
        return create_job(
            bus_domain=app,
            name=name,
            process_type_id=5,
            steps=[StepSpec(f"{name}_s{i}", 51) for i in range(5)],
        )

    probe = job("probe")
    many = [job(f"job{i}") for i in range(jobs)]
    log = settings.VAR_DIR / "bench-workers.log"
    workers = [
        start_worker(log, beat=False, concurrency=1, name=f"bench{i}@%h", loglevel="WARNING")
        for i in range(2)
    ]

    def wait_done(job_ids: list[int], since: int, timeout: float = 600) -> list[InstanceExec]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = list(
                InstanceExec.objects.filter(
                    process_id__in=job_ids, pk__gt=since, end_ts__isnull=False
                )
            )
            if len(done) == len(job_ids):
                return done
            time.sleep(0.01)
        raise RuntimeError(f"runs did not finish; see {log}")

    def last_id() -> int:
        return InstanceExec.objects.order_by("-id").values_list("pk", flat=True).first() or 0

    try:
        # Warm up: the workers import everything and open their connections.
        for _ in range(3):
            since = last_id()
            tasks.enqueue_run(probe.pk)
            wait_done([probe.pk], since)
        latencies = []
        for _ in range(runs):
            since = last_id()
            began = datetime.now(UTC)
            tasks.enqueue_run(probe.pk)
            (run,) = wait_done([probe.pk], since)
            assert run.exec_state_id == ExecState.SUCCESS, run.error
            latencies.append((run.end_ts - began).total_seconds())
        since = last_id()
        began = datetime.now(UTC)
        for j in many:
            tasks.enqueue_run(j.pk)
        done = wait_done([j.pk for j in many], since)
        assert all(r.exec_state_id == ExecState.SUCCESS for r in done)
        span = (max(r.end_ts for r in done) - began).total_seconds()
        steps = InstanceExec.objects.filter(parent__in=done).count()
    finally:
        for w in workers:
            stop_worker(w)
    return {
        "latency": summary(latencies),
        "runs": runs,
        "jobs": jobs,
        "steps": steps,
        "span_s": span,
        "jobs_per_minute": jobs / span * 60,
        "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        "broker": settings.CELERY_BROKER_URL.split(":", 1)[0],
    }


def report(results: dict[str, dict]) -> str:
    lines = [
        "A job of 5 no-op steps run by 2 Celery worker processes (concurrency 1 each); latency "
        "from queuing `run_process` to `halt_job`, one job at a time; throughput with the "
        "jobs queued at once.",
        "",
        "| setup | latency median (ms) | latency p95 (ms) | runs | jobs at once | "
        "jobs per minute |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} ({r['broker']} broker, {r['database']}) | "
            f"{r['latency']['median_ms']:.0f} | {r['latency']['p95_ms']:.0f} | {r['runs']} | "
            f"{r['jobs']} | {r['jobs_per_minute']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--setups", default="embedded,redis")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.runs, args.jobs)))
        return
    results = {}
    for setup in args.setups.split(","):
        var = ROOT / "var" / "bench" / f"orchestration-{setup}"
        shutil.rmtree(var, ignore_errors=True)
        var.mkdir(parents=True)
        env = {"BDRE_VAR_DIR": str(var)}  # the child's broker folders, logs
        if setup == "embedded":
            url = fresh_database("sqlite", "orchestration")
        else:
            url = fresh_database("postgres", "orchestration")
            import redis

            redis.Redis.from_url(REDIS_URL).flushdb()
            env["CELERY_BROKER_URL"] = REDIS_URL
        extra = ["--child", "--runs", str(args.runs), "--jobs", str(args.jobs)]
        results[setup] = run_child(Path(__file__), url, extra, env_extra=env)
    table = report(results)
    print(table)
    if not args.no_write:
        command = "python bench/orchestration.py " + " ".join(sys.argv[1:])
        append_results("Orchestration: overhead around the work", command, table)


if __name__ == "__main__":
    main()
