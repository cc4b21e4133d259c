"""Cluster benchmark: the same Spark work on local[2], on a standalone cluster and through
Spark Connect, in one run.

    .venv/bin/python bench/cluster.py [--events 200000] [--manifest N] [--rounds 2]
        [--cores 2] [--work DIR] [--no-append]

A standalone cluster (one Master, one Worker with 2 cores and 2 GiB, bdre/spark_cluster.py)
is started under ``--work`` (default ``var/bench/cluster``), and a Spark Connect server on it
with BDRE's session settings once the standalone runs are over (its application holds its
cores for as long as it runs, so beside them it would take the cores the standalone runs
are measured with). Both are always stopped at the end. Each mode runs in processes of its
own, so that no two sessions mix:

- shred: the shred benchmark's data (bench/shred.py's generator: ``--events`` events with
  2 % natural, 0.5 % synthetic duplicates, 1 % repeats of an earlier batch and 0.5 % new
  events reusing its ids) against a Parquet manifest (``--manifest`` pairs, 10 per event by
  default); in one session per mode, as bench/shred.py does: parse, the four deduplication
  strategies, write the atomic table, each phase timed; ``--rounds`` rounds, the best and
  the first reported, and the counters checked against the rules' line-by-line count;
- demo: `make demo`'s pipeline (tests/helpers/demo_runs.py: ingest, load/cleanse, shred, sql,
  export; two files of 400 events then one more) with its embedded worker: per step, the
  wall time of its runs (``InstanceExec`` end - start, summed) and their number, the whole
  ``manage.py demo --run`` and the span from the first step's start to the last one's end;
- cold against warm: in a new process, the session's creation (``get_spark()``, PySpark's
  import included) and a first small step-like job (read a small Parquet file, aggregate,
  write), then the same job again in the same session, as a worker that keeps its session
  runs its next step; the saving is cold (session + first job) minus warm.

Every mode's overhead is given as its time over local[2]'s. On the cluster, the shred and the
cold/warm processes and the Connect server's application take ``--cores`` cores (default 2,
local[2]'s, so that the ratio is the mode's cost and not fewer cores); the demo's standalone
worker keeps BDRE's one core per application (docs/operations.md), as its two Spark-queue
processes each hold an application and would otherwise wait for each other's cores.

Prints a table and appends it to docs/benchmarks.md (not with ``--no-append``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, append_results, run_json

WORK = ROOT / "var" / "bench" / "cluster"
MODES = ("local[2]", "standalone", "connect")
CHILD_TIMEOUT = 3600  # seconds for one child process (a shred or cold/warm measurement)
WARM_RUNS = 3


# --- the children: one Spark session each -------------------------------------------------


def shred_child(work: Path, rounds: int, manifest_rows: int) -> dict[str, Any]:
    """The shred transforms ``rounds`` times in this process's session (its mode is the
    environment's: SPARK_MASTER, SPARK_REMOTE)."""
    import django

    django.setup()
    from django.conf import settings
    from pyspark.sql import functions as F

    from processes.step_kinds import shred
    from processes.step_kinds.manifest import ParquetManifest
    from processes.step_kinds.shred_runner import STRATEGIES, shred_and_dedupe
    from processes.step_kinds.spark_session import application_id, get_spark

    data = json.loads((work / "data" / "earlier.json").read_text())
    path = work / "data" / "landing" / "events.tsv"
    result: dict[str, Any] = {}
    began = time.perf_counter()
    spark = get_spark()
    result["session_s"] = time.perf_counter() - began
    result["application"] = application_id(spark)

    # The Parquet manifest: the earlier batch's pairs plus filler, spread over 30 days.
    began = time.perf_counter()
    manifest = ParquetManifest(spark, "bench", ttl_days=180)
    filler = spark.range(max(0, manifest_rows - len(data["pairs"]))).select(
        F.expr("uuid()").alias("event_id"),
        F.md5(F.col("id").cast("string")).alias("event_fingerprint"),
        F.date_format(
            F.date_sub(F.current_date(), (F.col("id") % 30).cast("int")), "yyyy-MM-dd"
        ).alias("etl_date"),
        (F.col("id") % 30 + 1).alias("run_id"),
    )
    known = spark.createDataFrame(
        [tuple(p) for p in data["pairs"]], "event_id string, event_fingerprint string"
    ).select(
        "*",
        F.date_format(F.date_sub(F.current_date(), 1), "yyyy-MM-dd").alias("etl_date"),
        F.lit(31).cast("long").alias("run_id"),
    )
    filler.unionByName(known).select(
        *shred.hashes_of(F.col("event_id"), F.col("event_fingerprint")), "etl_date", "run_id"
    ).write.mode("overwrite").partitionBy("etl_date", "run_id").parquet(manifest.root)
    result["manifest_build_s"] = time.perf_counter() - began

    raw = spark.read.text(str(path)).select("value", F.input_file_name().alias("source_file"))
    out = settings.BDRE_WAREHOUSE / "bench" / "atomic"
    spark.read.text(str(path)).count()  # the page cache and the plan of a read, as shred.py
    result["rounds"] = []
    for _ in range(rounds):
        spark.catalog.clearCache()
        began = time.perf_counter()
        # The same target batch each round: a re-run, which never sees its own pairs.
        done = shred_and_dedupe(
            raw, run_id=1001, manifest=manifest, enabled=dict.fromkeys(STRATEGIES, True)
        )
        before_write = time.perf_counter()
        shred.atomic(done.events).write.mode("overwrite").parquet(str(out))
        ended = time.perf_counter()
        phases = {**done.seconds, "write the atomic events": ended - before_write}
        result["rounds"].append(
            {"total": ended - began, "phases": phases, "counters": done.counters}
        )
    return result


def coldwarm_child(work: Path) -> dict[str, Any]:
    """A worker's first step in a new process against its next one in the same session."""
    import django

    django.setup()
    from django.conf import settings

    began = time.perf_counter()
    from pyspark.sql import functions as F

    from processes.step_kinds.spark_session import get_spark

    spark = get_spark()
    session_s = time.perf_counter() - began
    source = str(work / "data" / "small.parquet")
    out = str(settings.BDRE_WAREHOUSE / "bench" / "small_agg")

    def step() -> float:
        began = time.perf_counter()
        spark.read.parquet(source).groupBy("category").agg(
            F.count(F.lit(1)).alias("rows"), F.sum("amount").alias("amount")
        ).write.mode("overwrite").parquet(out)
        return time.perf_counter() - began

    first = step()
    warm = [step() for _ in range(WARM_RUNS)]
    return {"session_s": session_s, "first_job_s": first, "warm_s": warm}


# --- the parent ----------------------------------------------------------------------------


def run_child(kind: str, work: Path, extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    """This script as ``--child kind``; its JVM is killed with it on an error or a timeout."""
    command = [sys.executable, str(Path(__file__)), "--child", kind, "--work", str(work), *extra]
    return run_json(command, env, timeout=CHILD_TIMEOUT)


def child_env(mode: str, target: str, work: Path, spark_conf: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CELERY_BROKER_URL", "SPARK_REMOTE", "SPARK_MASTER", "SPARK_CONF")
    }
    folder = work / mode_dir(mode)
    env |= {
        "BENCH_MODE": mode,
        "DJANGO_SETTINGS_MODULE": "bdre.settings",
        "DATABASE_URL": f"sqlite:///{work / 'bench.sqlite3'}",
        "BDRE_WAREHOUSE": str(folder / "warehouse"),
        "SPARK_CONF": json.dumps(spark_conf) if spark_conf else "",
    }
    if target.startswith("sc://"):
        env["SPARK_REMOTE"] = target
    else:
        env["SPARK_MASTER"] = target
    return env


def mode_dir(mode: str) -> str:
    return {"local[2]": "local", "standalone": "standalone", "connect": "connect"}[mode]


def prepare_data(work: Path, events: int) -> dict[str, Any]:
    """The shred benchmark's batch file and earlier pairs, and the small Parquet file of the
    cold/warm job."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    import bench.shred

    data = work / "data"
    bench.shred.WORK = data  # its generator writes under WORK/landing
    began = time.perf_counter()
    path, pairs, strategies = bench.shred.generate(events)
    (data / "earlier.json").write_text(json.dumps({"pairs": pairs}))
    rows = 100_000
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(rows), pa.int64()),
                "category": pa.array([f"c{i % 50}" for i in range(rows)]),
                "amount": pa.array([(i % 997) / 10 for i in range(rows)], pa.float64()),
            }
        ),
        data / "small.parquet",
    )
    return {
        "generate_s": time.perf_counter() - began,
        "lines": sum(1 for _ in path.open()),
        "file_mb": path.stat().st_size / 2**20,
        "expected": {s: v["expected"] for s, v in strategies.items()},
    }


def demo_steps(var_dir: Path) -> dict[str, Any]:
    """Per step name, the summed wall time of its runs and their number; the span from the
    first step run's start to the last one's end."""
    with sqlite3.connect(var_dir / "bdre.sqlite3") as db:
        rows = db.execute(
            "SELECT p.name, r.start_ts, r.end_ts FROM processes_instanceexec r "
            "JOIN processes_process p ON p.id = r.process_id "
            "WHERE r.parent_id IS NOT NULL AND r.end_ts IS NOT NULL"
        ).fetchall()
    steps: dict[str, dict[str, float]] = defaultdict(lambda: {"seconds": 0.0, "runs": 0})
    starts, ends = [], []
    for name, start, end in rows:
        began, ended = datetime.fromisoformat(start), datetime.fromisoformat(end)
        steps[name]["seconds"] += (ended - began).total_seconds()
        steps[name]["runs"] += 1
        starts.append(began)
        ends.append(ended)
    span = (max(ends) - min(starts)).total_seconds() if rows else 0.0
    return {"steps": dict(steps), "span_s": span}


def wait_idle(cluster: Any, timeout: float = 60) -> None:
    """Until the Master runs no application and lends no core: the cores a finished
    application held are free before the next one asks for them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = cluster.state()
        if not state.get("activeapps") and not state.get("coresused"):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the cluster is still busy after {timeout:.0f} s: {cluster.state()}")


def measure(
    mode: str,
    target: str,
    work: Path,
    args: argparse.Namespace,
    results: dict[str, Any],
    idle: Any = None,
) -> None:
    """The three measurements of one mode, each in processes of its own; ``idle`` (if any)
    is called before each, to wait until the previous one's application has left the
    cluster."""
    from tests.helpers.demo_runs import run_demo

    def wait() -> None:
        if idle is not None:
            idle()

    cluster_conf = {"spark.driver.host": "127.0.0.1"} if target.startswith("spark://") else {}
    # Single-application processes get --cores of the cluster (BDRE's default is one).
    single = cluster_conf | ({"spark.cores.max": str(args.cores)} if cluster_conf else {})
    env = child_env(mode, target, work, single)
    # Other processes on the machine show here: each mode's numbers are only as quiet as it.
    results["load"][mode] = [os.getloadavg()[0]]
    extra = ["--rounds", str(args.rounds), "--manifest", str(args.manifest)]
    wait()
    print(f"[{mode}] shred ...", file=sys.stderr, flush=True)
    results["shred"][mode] = run_child("shred", work, extra, env)

    wait()
    print(f"[{mode}] demo ...", file=sys.stderr, flush=True)
    var_dir = work / mode_dir(mode) / "demo"
    shutil.rmtree(var_dir, ignore_errors=True)
    var_dir.mkdir(parents=True)
    demo_env = {"SPARK_CONF": json.dumps(cluster_conf) if cluster_conf else ""}
    if target.startswith("sc://"):
        demo_env["SPARK_REMOTE"] = target
    else:
        demo_env |= {"SPARK_MASTER": target, "SPARK_REMOTE": ""}
    began = time.perf_counter()
    run = run_demo(var_dir, **demo_env)
    took = time.perf_counter() - began
    if run.returncode != 0:
        raise RuntimeError(f"the demo failed on {mode}:\n{run.out[-3000:]}\n{run.log[-3000:]}")
    results["demo"][mode] = {"wall_s": took, "counts": run.counts(), **demo_steps(var_dir)}

    wait()
    print(f"[{mode}] cold/warm ...", file=sys.stderr, flush=True)
    results["coldwarm"][mode] = run_child("coldwarm", work, [], env)
    results["load"][mode].append(os.getloadavg()[0])


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base > 0 else "-"


def report(r: dict[str, Any], args: argparse.Namespace) -> str:
    modes = [m for m in MODES if m in r["shred"]]
    others = [m for m in modes if m != "local[2]"]
    targets = ", ".join(f"{m} = `{r['targets'][m]}`" for m in modes)
    lines = [
        f"Modes: {targets}; the cluster is one Worker with 2 cores and 2 GiB. Shred, cold/warm "
        f"and the Connect server's application take {args.cores} core(s) of it; the demo's "
        "standalone worker BDRE's 1 per application (its 2 Spark-queue processes hold one "
        f"each). Whole benchmark: {r['total_s'] / 60:.1f} min. Load average (1 min) at each "
        "mode's start and end: "
        + ", ".join(f"{m} {r['load'][m][0]:.1f} to {r['load'][m][-1]:.1f}" for m in modes)
        + f" ({os.cpu_count()} cores).",
        "",
    ]

    # Shred: phases, best of the rounds (first in brackets).
    d = r["data"]
    lines += [
        f"**Shred**: {d['lines']:,} lines ({d['file_mb']:.0f} MiB) of {args.events:,} events "
        f"against a Parquet manifest of {args.manifest:,} pairs; seconds, best of "
        f"{args.rounds} rounds in one session (first round in brackets); ratio = mode / "
        "local[2] on the best.",
        "",
        "| phase | " + " | ".join(modes) + " | " + " | ".join(f"{m} ratio" for m in others) + " |",
        "|---" * (1 + len(modes) + len(others)) + "|",
    ]

    def best(mode: str) -> dict[str, Any]:
        rounds = r["shred"][mode]["rounds"]
        return min(rounds, key=lambda x: x["total"])

    phases = [*best("local[2]")["phases"], "total"]
    for phase in phases:

        def value(mode: str, which: dict[str, Any], phase: str = phase) -> float:
            return which["total"] if phase == "total" else which["phases"].get(phase, 0.0)

        cells = [
            f"{value(m, best(m)):.2f} ({value(m, r['shred'][m]['rounds'][0]):.2f})" for m in modes
        ]
        base = value("local[2]", best("local[2]"))
        cells += [ratio(value(m, best(m)), base) for m in others]
        label = f"**{phase}**" if phase == "total" else phase
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in (("session_s", "session creation"), ("manifest_build_s", "manifest build")):
        base = r["shred"]["local[2]"][key]
        cells = [f"{r['shred'][m][key]:.2f}" for m in modes]
        cells += [ratio(r["shred"][m][key], base) for m in others]
        lines.append(f"| ({label}) | " + " | ".join(cells) + " |")
    checks = {
        m: all(
            rd["counters"].get(f"dup_{s}") == n
            for rd in r["shred"][m]["rounds"]
            for s, n in d["expected"].items()
        )
        for m in modes
    }
    lines += [
        "",
        "Counters equal to the rules' line-by-line count in every round: "
        + ", ".join(f"{m} {'yes' if ok else 'NO'}" for m, ok in checks.items())
        + ".",
        "",
    ]

    # Demo: per step.
    demo = r["demo"]
    lines += [
        "**Demo pipeline** (`manage.py demo --run`, 2 files of 400 events then 1 more, "
        "embedded worker with 2 processes): per step, the summed wall time of its runs in "
        "seconds (runs in brackets; a worker process's first Spark step includes its "
        "session's creation); ratio = mode / local[2].",
        "",
        "| step | " + " | ".join(modes) + " | " + " | ".join(f"{m} ratio" for m in others) + " |",
        "|---" * (1 + len(modes) + len(others)) + "|",
    ]
    names = sorted({n for m in modes for n in demo[m]["steps"]})
    zero = {"seconds": 0.0, "runs": 0}
    for name in names:
        got = {m: demo[m]["steps"].get(name, zero) for m in modes}
        cells = [f"{got[m]['seconds']:.2f} ({got[m]['runs']})" for m in modes]
        cells += [ratio(got[m]["seconds"], got["local[2]"]["seconds"]) for m in others]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for key, label in (
        ("steps", "all steps"),
        ("span_s", "first step start to last step end"),
        ("wall_s", "whole `manage.py demo --run`"),
    ):

        def total(mode: str, key: str = key) -> float:
            if key == "steps":
                return sum(s["seconds"] for s in demo[mode]["steps"].values())
            value: float = demo[mode][key]
            return value

        cells = [f"{total(m):.2f}" for m in modes]
        cells += [ratio(total(m), total("local[2]")) for m in others]
        lines.append(f"| **{label}** | " + " | ".join(cells) + " |")
    # How many batches and quiet checks depends on how many scans found nothing yet (how
    # fast each step ran); the data's numbers do not (tests/cluster compares the same).
    timing = ("batches", "quiet checks")
    counts = {m: {k: v for k, v in demo[m]["counts"].items() if k not in timing} for m in modes}
    same = all(counts[m] == counts["local[2]"] for m in modes)
    lines += [
        "",
        "The demo's summary numbers (rows, duplicates; batches and quiet checks aside) the "
        "same in every mode: " + ("yes." if same else "NO: " + json.dumps(counts)),
        "",
    ]

    # Cold against warm.
    cw = r["coldwarm"]
    lines += [
        "**Cold against warm worker**: a new process's session (`get_spark()`, PySpark's "
        "import included) and its first small job (read 100,000 rows of Parquet, group by "
        f"50 keys, write), against the same job again in the same session (median of "
        f"{WARM_RUNS}); seconds.",
        "",
        "| mode | session | first job | cold (session + first job) | warm job "
        "| a kept session saves | cold / warm |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in modes:
        c = cw[m]
        cold = c["session_s"] + c["first_job_s"]
        warm = statistics.median(c["warm_s"])
        lines.append(
            f"| {m} | {c['session_s']:.2f} | {c['first_job_s']:.2f} | {cold:.2f} | "
            f"{warm:.2f} | {cold - warm:.2f} s ({(cold - warm) / cold:.0%}) | "
            f"{ratio(cold, warm)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--manifest", type=int, default=None, help="pairs (10 per event)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2, help="cluster cores per application")
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--no-append", action="store_true", help="print only")
    parser.add_argument("--child", choices=["shred", "coldwarm"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.manifest is None:
        args.manifest = 10 * args.events
    work = args.work.resolve()
    if args.child == "shred":
        print(json.dumps(shred_child(work, args.rounds, args.manifest)))
        return
    if args.child == "coldwarm":
        print(json.dumps(coldwarm_child(work)))
        return

    began = time.perf_counter()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bdre.settings")
    os.environ["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
    import django

    django.setup()
    from bdre import spark_cluster
    from processes.step_kinds.spark_session import session_conf

    results: dict[str, Any] = {"shred": {}, "demo": {}, "coldwarm": {}, "targets": {}, "load": {}}
    print(f"generating {args.events:,} events ...", file=sys.stderr, flush=True)
    results["data"] = prepare_data(work, args.events)
    cluster = server = None
    try:
        results["targets"]["local[2]"] = "local[2]"
        measure("local[2]", "local[2]", work, args, results)

        print("starting the standalone cluster ...", file=sys.stderr, flush=True)
        cluster = spark_cluster.start(work / "spark-cluster", cores=2, memory="2g")
        results["targets"]["standalone"] = cluster.master_url

        def cluster_idle() -> None:
            wait_idle(cluster)

        measure("standalone", cluster.master_url, work, args, results, cluster_idle)
        cluster_idle()

        # As tests/cluster/conftest.py starts it, with --cores of the cluster: the standalone
        # applications have ended, so nothing else wants them.
        print("starting the Spark Connect server ...", file=sys.stderr, flush=True)
        connect_work = work / "spark-connect"
        conf = session_conf(cluster.master_url) | {
            "spark.sql.warehouse.dir": str(connect_work / "warehouse"),
            "spark.executor.memory": "1g",
            "spark.driver.host": "127.0.0.1",
            "spark.cores.max": str(args.cores),
        }
        server = spark_cluster.start_connect(connect_work, master=cluster.master_url, conf=conf)
        results["targets"]["connect"] = server.remote_url
        measure("connect", server.remote_url, work, args, results)
    finally:
        if server is not None:
            server.stop()
        if cluster is not None:
            cluster.stop()
    results["total_s"] = time.perf_counter() - began
    (work / "results.json").write_text(json.dumps(results, indent=1))
    table = report(results, args)
    print(table)
    if not args.no_append:
        command = "python bench/cluster.py " + " ".join(sys.argv[1:])
        append_results("Cluster: local[2], a standalone cluster and Spark Connect", command, table)


if __name__ == "__main__":
    main()
