"""Publishing a batch (write, audit, publish): the job's halt publishing the partitions its steps
wrote, against the number of partitions, on each database.

    .venv/bin/python bench/publish.py [--backends sqlite,postgres] [--partitions 1,20,200]
        [--samples 30] [--no-write]

Each backend runs in its own interpreter against a fresh database. For each sample, a job of
one step writes one partition of each of N tables for its batch (records only: the files are
Spark's business and outside what is timed) and halt_job publishes them: timed is the whole
halt_job (the publish, the queueing downstream, the archive, in its one transaction). Then the
batch is rebuilt: another attempt's N partitions, published in place of the first
(partitions.publish alone, timed apart). Appends to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import append_results, fresh_database, run_child, summary


def child(sizes: list[int], samples: int) -> dict:
    import django

    django.setup()
    from django.contrib.auth.models import Group
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from batches import partitions
    from batches.models import HiveTable
    from processes import lifecycle
    from processes.models import BusDomain, ExecState, InstanceExec
    from processes.registry import StepSpec, create_job

    call_command("migrate", verbosity=0)
    team = Group.objects.create(name="bench")
    app = BusDomain.objects.create(name="bench", team=team)
    job = create_job(
        bus_domain=app, name="publish", process_type_id=5, steps=[StepSpec("publish_s", 51)]
    )
    step = job.steps.get()
    results: dict = {}
    for size in sizes:
        tables = [
            HiveTable.objects.create(
                dbname="bench",
                table_name=f"t{size}_{n}",
                location=f"/bench/t{size}_{n}",
                batch_id_partition_col="batch_id",
                bus_domain=app,
            )
            for n in range(size)
        ]

        def write_all(batch: int, step_run: int, tables: list = tables) -> None:
            for table in tables:
                partitions.record_written(
                    table,
                    batch_id=batch,
                    step_run_id=step_run,
                    location=partitions.attempt_location(table, batch, step_run),
                    rows=1000,
                    size=10_000,
                )

        halts, publishes, statements = [], [], 0
        for sample in range(samples + 3):  # the first 3 warm the caches
            batch = lifecycle.init_job(job.pk).target_batch_id
            step_run = lifecycle.init_step(step.pk)
            write_all(batch, step_run)
            lifecycle.halt_step(step.pk)
            connection.queries_log.clear()  # it keeps 9,000: a full log counts nothing new
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                lifecycle.halt_job(job.pk)
                halted = time.perf_counter() - started
            # The batch rebuilt: another attempt, published in place of the first.
            again = InstanceExec.objects.create(
                process=step, start_ts=timezone.now(), exec_state_id=ExecState.SUCCESS
            ).pk
            write_all(batch, again)
            with transaction.atomic():
                started = time.perf_counter()
                partitions.publish(batch)
                replaced = time.perf_counter() - started
            if sample >= 3:
                halts.append(halted)
                publishes.append(replaced)
                statements = len(queries)
        results[str(size)] = {
            "halt_job": summary(halts),
            "publish": summary(publishes),
            "halt_statements": statements,
        }
    return results


def report(all_results: dict[str, dict], sizes: list[int]) -> str:
    lines = [
        "| backend | partitions | halt_job: median / p95 ms | its statements "
        "| publish replacing them: median / p95 ms |",
        "|---|---:|---|---:|---|",
    ]
    for backend, results in all_results.items():
        for size in sizes:
            r = results[str(size)]
            lines.append(
                f"| {backend} | {size} | {r['halt_job']['median_ms']:.1f} / "
                f"{r['halt_job']['p95_ms']:.1f} | {r['halt_statements']} | "
                f"{r['publish']['median_ms']:.1f} / {r['publish']['p95_ms']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--partitions", default="1,20,200")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    sizes = [int(n) for n in args.partitions.split(",")]
    if args.child:
        print(json.dumps(child(sizes, args.samples)))
        return
    results = {}
    for backend in args.backends.split(","):
        url = fresh_database(backend, "publish")
        print(f"running {backend} ...", file=sys.stderr, flush=True)
        results[backend] = run_child(
            Path(__file__),
            url,
            ["--child", "--partitions", args.partitions, "--samples", str(args.samples)],
        )
    table = report(results, sizes)
    print(table)
    if not args.no_write:
        command = "python bench/publish.py " + " ".join(sys.argv[1:])
        append_results("Publishing a batch's partitions (write, audit, publish)", command, table)


if __name__ == "__main__":
    main()
