"""Lifecycle benchmark: full cycles per second, and init_job latency against queue depth.

    .venv/bin/python bench/lifecycle.py [--backends sqlite,postgres]
        [--depths 10000,100000,1000000] [--cycles 500] [--samples 40] [--no-write]

Each backend runs in its own interpreter against a fresh database (a SQLite file under
var/bench/, or a PostgreSQL database bench_lifecycle on 127.0.0.1). Prints a table and
appends it to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import append_results, fresh_database, run_child, summary


def child(backend: str, depths: list[int], cycles: int, samples: int) -> dict:
    import django

    django.setup()
    from django.contrib.auth.models import Group
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from processes import lifecycle
    from processes.models import BusDomain
    from processes.registry import StepSpec, create_job

    call_command("migrate", verbosity=0)
    team = Group.objects.create(name="bench")
    app = BusDomain.objects.create(name="bench", team=team)

    def job(name: str, upstream=None):
        created = create_job(
            bus_domain=app,
            name=name,
            process_type_id=5,
            steps=[StepSpec(f"{name}_step", 51, upstream=[upstream.pk] if upstream else [])],
        )
        return created, created.steps.get()

    def fill(upstream, step, n: int) -> None:
        """Queue ``n`` new batches for ``step``: two INSERT ... SELECT statements."""
        now = timezone.now()
        with connection.cursor() as c:
            c.execute("SELECT COALESCE(MAX(id), 0) FROM batches_batch")
            before = c.fetchone()[0]
            c.execute(
                "WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < %s) "
                "INSERT INTO batches_batch (batch_type, created_ts, bus_domain_id) "
                "SELECT 'bench', %s, %s FROM seq",
                [n, now, app.pk],
            )
            c.execute(
                "INSERT INTO batches_batchconsumpqueue (source_batch_id, insert_ts, "
                "source_process_id, process_id, batch_state_id, batch_marking, attempts, "
                "last_error) SELECT id, %s, %s, %s, 0, '2026-11-21', 0, '' "
                "FROM batches_batch WHERE id > %s ORDER BY id",
                [now, upstream.pk, step.pk, before],
            )
            c.execute("ANALYZE")

    def cycle(job_, step, max_batch: int) -> float:
        started = time.perf_counter()
        lifecycle.init_job(job_.pk, max_batch)
        took = time.perf_counter() - started
        lifecycle.init_step(step.pk)
        lifecycle.halt_step(step.pk)
        lifecycle.halt_job(job_.pk)
        return took

    results: dict = {"backend": backend}

    # Full cycles: a one-step job claiming one batch per run.
    up1, _ = job("cycle_up")
    j1, s1 = job("cycle", up1)
    fill(up1, s1, cycles + 10)
    for _ in range(10):  # warm-up
        cycle(j1, s1, 1)
    started = time.perf_counter()
    for _ in range(cycles):
        cycle(j1, s1, 1)
    elapsed = time.perf_counter() - started
    results["cycles_per_second"] = cycles / elapsed

    # init_job latency at growing depths, max_batch=100, depth kept constant by refilling.
    up2, _ = job("depth_up")
    j2, s2 = job("depth", up2)
    results["latency"] = {}
    queued = 0
    for depth in depths:
        fill(up2, s2, depth - queued)
        queued = depth
        for _ in range(3):
            cycle(j2, s2, 100)
            fill(up2, s2, 100)
        timings = []
        for _ in range(samples):
            timings.append(cycle(j2, s2, 100))
            fill(up2, s2, 100)
        results["latency"][str(depth)] = summary(timings)

    # Where the time goes: each statement of one init_job at the deepest queue.
    statements: list[tuple[float, str]] = []

    def timed(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append((time.perf_counter() - started, sql))

    with connection.execute_wrapper(timed):
        total_started = time.perf_counter()
        lifecycle.init_job(j2.pk, 100)
        total = time.perf_counter() - total_started
    results["profile"] = {
        "total_ms": total * 1000,
        "statements": len(statements),
        "sql_ms": sum(t for t, _ in statements) * 1000,
        "top": [
            {"ms": t * 1000, "sql": " ".join(sql.split())[:140]}
            for t, sql in sorted(statements, reverse=True)[:4]
        ],
    }
    return results


def report(all_results: list[dict], depths: list[int]) -> str:
    lines = [
        "| backend | full cycles/s | "
        + " | ".join(f"init_job @ {d:,} queued: median / p95 ms" for d in depths)
        + " | 1M / 10k median |",
        "|---|---|" + "---|" * len(depths) + "---|",
    ]
    for r in all_results:
        cells = [
            f"{r['latency'][str(d)]['median_ms']:.2f} / {r['latency'][str(d)]['p95_ms']:.2f}"
            for d in depths
        ]
        ratio = (
            r["latency"][str(depths[-1])]["median_ms"] / r["latency"][str(depths[0])]["median_ms"]
        )
        lines.append(
            f"| {r['backend']} | {r['cycles_per_second']:.0f} | "
            + " | ".join(cells)
            + f" | {ratio:.2f}x |"
        )
    lines.append("")
    for r in all_results:
        p = r["profile"]
        lines.append(
            f"One init_job at {depths[-1]:,} queued on {r['backend']}: {p['total_ms']:.2f} ms, "
            f"{p['statements']} statements, {p['sql_ms']:.2f} ms in SQL. Slowest statements:"
        )
        lines.append("")
        for top in p["top"]:
            lines.append(f"- {top['ms']:.2f} ms `{top['sql']}`")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--depths", default="10000,100000,1000000")
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    if args.child:
        print(json.dumps(child(args.child, depths, args.cycles, args.samples)))
        return
    results = []
    for backend in args.backends.split(","):
        url = fresh_database(backend, "lifecycle")
        print(f"running {backend} ...", file=sys.stderr, flush=True)
        results.append(
            run_child(
                Path(__file__),
                url,
                [
                    "--child",
                    backend,
                    "--depths",
                    args.depths,
                    "--cycles",
                    str(args.cycles),
                    "--samples",
                    str(args.samples),
                ],
            )
        )
    table = report(results, depths)
    print(table)
    if not args.no_write:
        command = "python bench/lifecycle.py " + " ".join(sys.argv[1:])
        append_results("Lifecycle: cycles and init_job latency vs queue depth", command, table)


if __name__ == "__main__":
    main()
