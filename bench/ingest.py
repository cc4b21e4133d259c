"""Ingestion benchmark: finding 1,000 new files among 100,000 registered ones.

    .venv/bin/python bench/ingest.py [--existing 100000] [--new 1000]
        [--backends local,s3] [--no-spark] [--no-write]

For each backend (a local folder, and an S3 endpoint served by moto_server on 127.0.0.1)
it compares (a) BDRE's marker scan (listing after the marker and registering the new files),
(b) a full listing diffed against the registered files, and, on the local folder, (c) Spark
Structured Streaming's file source run with Trigger.AvailableNow and a checkpoint that
already holds the old files. Prints a table and appends it to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, append_results, fresh_database, run_child

WORK = ROOT / "var" / "bench" / "ingest"


def key(i: int) -> str:
    return f"feed/hourly_feed.{1_700_000_000 + i:012d}.tsv"


def start_moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto_server did not start")


def spark_available_now(landing: Path, checkpoint: Path) -> tuple[float, int]:
    """One Trigger.AvailableNow run of the file source; returns (seconds, files read)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import input_file_name

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bdre-bench-ingest")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter()
    stream = (
        spark.readStream.format("text")
        .option("recursiveFileLookup", "true")
        .load(str(landing))
        .withColumn("file", input_file_name())
    )
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    took = time.perf_counter() - started
    files = sum(int(p["numInputRows"]) for p in query.recentProgress)
    return took, files


def child(backends: list[str], existing: int, new: int, spark: bool) -> dict:
    import django

    django.setup()
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from batches.ingest.scan import scan
    from batches.ingest.storage import open_storage, s3_client
    from batches.models import File
    from processes.models import BusDomain, Server
    from processes.registry import StepSpec, create_job

    call_command("migrate", verbosity=0)
    app = BusDomain.objects.create(name="bench", team=Group.objects.create(name="bench"))
    results: dict = {"existing": existing, "new": new, "backends": {}}
    moto = None
    try:
        for backend in backends:
            if backend == "local":
                landing = WORK / "landing"
                shutil.rmtree(WORK, ignore_errors=True)
                (landing / "feed").mkdir(parents=True)

                def put(i: int, landing=landing) -> None:
                    (landing / key(i)).write_text(f"event\t{i}\n")

                location = landing.as_uri()
                # The folder an installation superuser granted the team.
                Server.objects.create(
                    team=app.team, server_type="local", name="bench-local", root=location
                )
            else:
                moto, endpoint = start_moto()
                client = s3_client(endpoint_url=endpoint, region="us-east-1")
                client.create_bucket(Bucket="bench")

                def put(i: int, client=client) -> None:
                    client.put_object(Bucket="bench", Key=key(i), Body=f"event\t{i}\n".encode())

                location = "s3://bench/"
                # The bucket an installation superuser granted the team, with its endpoint.
                Server.objects.create(
                    team=app.team,
                    server_type="s3",
                    name="bench-s3",
                    root=location,
                    metainfo=f"endpoint_url={endpoint}\nregion=us-east-1",
                )
            started = time.perf_counter()
            with ThreadPoolExecutor(16 if backend == "s3" else 4) as pool:
                list(pool.map(put, range(existing)))
            setup_s = time.perf_counter() - started
            job = create_job(
                bus_domain=app,
                name=f"ingest_{backend}",
                process_type_id=5,
                steps=[
                    StepSpec(
                        f"scan_{backend}",
                        52,
                        properties={
                            "scan": {
                                "location": location,
                                "min_age_seconds": "0",
                                "max_files": str(existing + new),
                                "reconcile_every": "0",
                            }
                        },
                    )
                ],
            )
            step = job.steps.get()
            row: dict = {"setup_s": setup_s}
            spark_dir = WORK / f"spark-{backend}"
            if spark and backend == "local":
                shutil.rmtree(spark_dir, ignore_errors=True)
                first_s, first_files = spark_available_now(landing, spark_dir / "checkpoint")
                row["spark_first"] = {"seconds": first_s, "files": first_files}
            started = time.perf_counter()
            initial = scan(step.pk)
            row["initial_registration"] = {
                "seconds": time.perf_counter() - started,
                "registered": initial.registered,
            }
            with ThreadPoolExecutor(16 if backend == "s3" else 4) as pool:
                list(pool.map(put, range(existing, existing + new)))

            # (b) a full listing diffed against the registered files
            storage = open_storage(location, **({"client": client} if backend == "s3" else {}))
            started = time.perf_counter()
            registered = set(File.objects.values_list("path", flat=True))
            found = [
                o
                for page in storage.pages("")
                for o in page
                if storage.uri_of(o.key) not in registered
            ]
            row["full_listing"] = {
                "seconds": time.perf_counter() - started,
                "keys_listed": storage.stats.keys_listed,
                "list_calls": storage.stats.list_calls,
                "found": len(found),
            }
            # (a) the marker scan, registering what it finds
            started = time.perf_counter()
            result = scan(step.pk)
            row["marker_scan"] = {
                "seconds": time.perf_counter() - started,
                "keys_listed": result.listed,
                "list_calls": result.list_calls,
                "found": result.registered,
            }
            # (c) Spark's file source, its checkpoint holding the old files
            if spark and backend == "local":
                took, files = spark_available_now(landing, spark_dir / "checkpoint")
                row["spark"] = {
                    "seconds": took,
                    "keys_listed": existing + new,  # the file source lists the whole folder
                    "found": files,
                }
            results["backends"][backend] = row
            if moto is not None:
                moto.terminate()
                moto = None
    finally:
        if moto is not None:
            moto.terminate()
    return results


def report(r: dict) -> str:
    lines = [
        f"{r['new']:,} new files among {r['existing']:,} registered ones.",
        "",
        "| backend | method | time (s) | keys listed | list calls | new files found |",
        "|---|---|---|---|---|---|",
    ]
    for backend, row in r["backends"].items():
        methods = [
            ("(a) BDRE marker scan, registering them", row["marker_scan"]),
            ("(b) full listing diffed with the registry", row["full_listing"]),
        ]
        if "spark" in row:
            methods.append(("(c) Spark file source, AvailableNow + checkpoint", row["spark"]))
        for name, m in methods:
            calls = m.get("list_calls", "-")
            lines.append(
                f"| {backend} | {name} | {m['seconds']:.3f} | {m['keys_listed']:,} | {calls} "
                f"| {m['found']:,} |"
            )
    lines.append("")
    for backend, row in r["backends"].items():
        a, b = row["marker_scan"], row["full_listing"]
        share = 100 * a["keys_listed"] / b["keys_listed"]
        lines.append(
            f"- {backend}: the marker scan listed {share:.2f} % of the keys of the full listing "
            f"and took {a['seconds'] / b['seconds']:.2f}x its time"
            + (f", {a['seconds'] / row['spark']['seconds']:.3f}x Spark's" if "spark" in row else "")
            + f". Set-up: writing {r['existing']:,} files took {row['setup_s']:.0f} s; the "
            f"first scan registered {row['initial_registration']['registered']:,} in "
            f"{row['initial_registration']['seconds']:.1f} s"
            + (
                f"; Spark's first run read {row['spark_first']['files']:,} in "
                f"{row['spark_first']['seconds']:.1f} s"
                if "spark_first" in row
                else ""
            )
            + "."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--backends", default="local,s3")
    parser.add_argument("--existing", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=1_000)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    backends = args.backends.split(",")
    if args.child:
        print(json.dumps(child(backends, args.existing, args.new, not args.no_spark)))
        return
    url = fresh_database("sqlite", "ingest")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    extra = ["--backends", args.backends, "--existing", str(args.existing), "--new", str(args.new)]
    if args.no_spark:
        extra.append("--no-spark")
    result = run_child(Path(__file__), url, ["--child", *extra])
    table = report(result)
    print(table)
    if not args.no_write:
        command = "python bench/ingest.py " + " ".join(sys.argv[1:])
        append_results("Ingestion: finding new files", command, table)


if __name__ == "__main__":
    main()
