"""Expectations benchmark: the cost of checking 5 row rules and 3 batch rules on 1 million events.

    .venv/bin/python bench/expectations.py [--events 1000000] [--no-write]

The shred's body as a step runs it (parse, the in-batch deduplication strategies, write the
atomic table) on the sample batch of bench/shred.py, with and without the expectations a step
declares on the atomic table, checked as ``spark_io.write_batch`` checks them
(``expectations.plan``: every rule counted by an observation of the write itself, the one
pass over the batch; then ``expectations.measure`` on the numbers it counted, and a second
pass only for the rows a drop rule took out, of which there are none here):

- row rules: event_id present (drop), collector_tstamp present (warn), the platform known
  (warn), app_id not empty (warn), the event's kind known (fail);
- batch rules: rows(1, *), null_ratio(user_id) <= 0.5, volume(10, 2) against a history.

Rounds alternate between the two variants in one Spark session (local[*], the machine's
cores); the best of each is compared. Prints a table and appends it to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, append_results, fresh_database, run_child

WORK = ROOT / "var" / "bench" / "expectations"
ROUNDS = 3
RULES = {
    "atomic_events.event_id_present": "drop: event_id IS NOT NULL",
    "atomic_events.collected": "warn: collector_tstamp IS NOT NULL",
    "atomic_events.known_platform": "warn: platform IN ('web', 'mob', 'app', 'srv')",
    "atomic_events.has_app": "warn: length(app_id) > 0",
    "atomic_events.known_event": "fail: event IN ('page_view', 'struct', 'unstruct')",
    "atomic_events.some": "warn: rows(1, *)",
    "atomic_events.users_known": "warn: null_ratio(user_id) <= 0.5",
    "atomic_events.steady": "warn: volume(10, 2)",
}


def child(events: int) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from pyspark.sql import functions as F

    from bench.shred import generate
    from processes.step_kinds import expectations, shred
    from processes.step_kinds.shred_runner import STRATEGIES, shred_and_dedupe
    from processes.step_kinds.spark_session import get_spark

    call_command("migrate", verbosity=0)
    shutil.rmtree(WORK, ignore_errors=True)
    path, _earlier, _planted = generate(events)
    lines = sum(1 for _ in path.open())
    spark = get_spark()
    raw = spark.read.text(str(path)).select("value", F.input_file_name().alias("source_file"))
    out = settings.BDRE_WAREHOUSE / "bench-expectations"
    rules = expectations.rules_of(RULES)
    enabled = {s: s.startswith("in_batch") for s in STRATEGIES}
    history = [events] * 10

    def without() -> dict:
        done = shred_and_dedupe(raw, run_id=1, manifest=None, enabled=enabled)
        shred.atomic(done.events).write.mode("overwrite").parquet(str(out / "plain"))
        return {}

    def checked() -> dict:
        done = shred_and_dedupe(raw, run_id=1, manifest=None, enabled=enabled)
        planned = expectations.plan(shred.atomic(done.events), rules)
        planned.kept.write.mode("overwrite").parquet(str(out / "checked"))
        written = spark.read.parquet(str(out / "checked"))
        result = expectations.measure(planned, written, others=None, history=lambda r: history)
        assert not result.dropped  # else write_batch writes the quarantine: a second pass
        expectations.sample(result, rules, written, None)
        return {r["rule"]: r["failed"] for r in result.results}

    spark.read.text(str(path)).count()  # the JVM and the page cache warm for both
    timings: dict[str, list[float]] = {"without": [], "checked": []}
    failed: dict = {}
    for _ in range(ROUNDS):
        for name, body in (("without", without), ("checked", checked)):
            spark.catalog.clearCache()
            began = time.perf_counter()
            failed = body() or failed
            timings[name].append(time.perf_counter() - began)
    return {
        "events": events,
        "lines": lines,
        "timings": timings,
        "failed": failed,
        "spark_master": settings.SPARK_MASTER,
    }


def report(r: dict) -> str:
    best = {name: min(rounds) for name, rounds in r["timings"].items()}
    ratio = best["checked"] / best["without"]
    lines = [
        f"{r['lines']:,} lines of {r['events']:,} events (bench/shred.py's batch), shred with "
        f"the in-batch deduplication and the atomic table written; Spark {r['spark_master']}.",
        "",
        "| run | best time (s) (each round) |",
        "|---|---|",
    ]
    for name, label in (("without", "no expectations"), ("checked", "5 row rules, 3 batch rules")):
        each = ", ".join(f"{x:.1f}" for x in r["timings"][name])
        lines.append(f"| {label} | {best[name]:.1f} ({each}) |")
    lines += [
        "",
        "Rows each rule failed: " + ", ".join(f"{k} {v:,}" for k, v in r["failed"].items()),
        "",
        f"Checking the rules costs {ratio:.2f}x the shred without them (target: at most 1.15x).",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.events)))
        return
    os.environ.setdefault("SPARK_DRIVER_MEMORY", "8g")
    os.environ.setdefault("BDRE_WAREHOUSE", str(WORK / "warehouse"))
    url = fresh_database("sqlite", "expectations")
    result = run_child(Path(__file__), url, ["--child", "--events", str(args.events)])
    table = report(result)
    print(table)
    if not args.no_write:
        command = "python bench/expectations.py " + " ".join(sys.argv[1:])
        append_results("Expectations: 5 row rules and 3 batch rules on the shred", command, table)


if __name__ == "__main__":
    main()
