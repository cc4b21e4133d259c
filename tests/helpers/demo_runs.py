"""`make demo`'s non-interactive part run in a process of its own, and what it leaves: the
numbers it prints and the rows of every table it wrote (tests/cluster/test_pipelines.py runs it
on local[2], on a standalone cluster and through Spark Connect)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The demo's jobs, scans first.
JOBS = (
    "clickstream_ingest",
    "clickstream_pages_ingest",
    "clickstream_shred",
    "clickstream_pages",
    "clickstream_daily",
    "clickstream_daily_export",
)


@dataclass
class DemoRun:
    var_dir: Path
    returncode: int
    out: str
    log: str  # the process's stderr and the embedded worker's log, for a failure's message

    def counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in re.findall(r"^\s+([a-z ,]+):\s+(\d+)$", self.out, re.M)}

    def published_files(self, folder: Path) -> list[str]:
        """The Parquet files of the partitions published of the table at ``folder``, as
        the demo's registry says (batches.partitions): what a reader of the table sees."""
        import sqlite3

        with contextlib.closing(sqlite3.connect(self.var_dir / "bdre.sqlite3")) as db:
            rows = db.execute(
                "SELECT p.location FROM batches_partition p JOIN batches_hivetable t "
                "ON t.id = p.table_id WHERE p.state = 'published' AND t.location = ?",
                (str(folder),),
            ).fetchall()
        return sorted(str(f) for (location,) in rows for f in Path(location).glob("*.parquet"))

    def table(self, name: str, columns: list[str]) -> list[tuple[object, ...]]:
        """The rows of the demo's table ``db.table``, of the ``columns`` named."""
        import pyarrow.dataset as ds

        database, table = name.split(".")
        (folder,) = (self.var_dir / "warehouse").glob(f"team-*/{database}/{table}")
        rows = ds.dataset(self.published_files(folder), format="parquet").to_table(columns)
        return [tuple(row[c] for c in columns) for row in rows.to_pylist()]

    def tables(self) -> dict[str, list[tuple[object, ...]]]:
        """Each table the demo wrote (``db.table``), as its sorted rows without ``batch_id``:
        batch ids depend on how many scans ran before the files were ready, the rows do not.
        What names the run's own files stands for them: its folder (``<var>``), the time in
        a landed file's name (``events-<time>-01.tsv``, ``pages-<time>.csv``; the demo
        names files by when they land) and so the new ids minted for synthetic duplicates,
        which are derived from the file's name (``<minted>``; the duplicate context keeps
        each one's original id)."""
        import pyarrow.dataset as ds

        folders = [
            folder
            for folder in sorted((self.var_dir / "warehouse").glob("team-*/*/*"))
            if folder.is_dir() and any(folder.glob("batch_id=*"))
        ]
        # The export's folder holds CSV files (exports/daily_page_views), the tables Parquet.
        # The export's folder holds CSV files (exports/daily_page_views), the tables Parquet,
        # of which a reader sees the published partitions.
        data = {
            f"{folder.parent.name}.{folder.name}": (
                ds.dataset(folder, format="csv", partitioning="hive")
                if folder.parent.name == "exports"
                else ds.dataset(self.published_files(folder), format="parquet")
            ).to_table()
            for folder in folders
        }
        duplicates = data.get("default.com_snowplowanalytics_snowplow_duplicate_1")
        minted = set(duplicates.column("root_id").to_pylist()) if duplicates is not None else set()

        def stable(value: object) -> object:
            if not isinstance(value, str):
                return value
            if value in minted:
                return "<minted>"
            value = value.replace(str(self.var_dir), "<var>")
            return re.sub(r"\b(events|pages)-\d{8}-\d{6}", r"\1-<time>", value)

        tables = {}
        for name, table in data.items():
            columns = [c for c in table.column_names if c != "batch_id"]
            rows = [
                tuple(stable(row[c]) for c in columns) for row in table.select(columns).to_pylist()
            ]
            tables[name] = sorted(rows, key=repr)
        return tables


# The demo's own deadline for each of its two waits; it fails with its reason past one.
WAIT = 400
# Past both waits, the set-up and stopping the worker (a minute for running steps), the demo
# is stuck rather than slow: its process group is killed.
KILL_AFTER = 2 * WAIT + 180


def run_demo(var_dir: Path, **env: str) -> DemoRun:
    """Migrate and run ``manage.py demo --run`` (2 files of 400 events, then 1 more) with
    ``env`` (``SPARK_MASTER``, ``SPARK_REMOTE``) on the embedded default."""
    environ = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")
    }
    environ |= {"BDRE_VAR_DIR": str(var_dir), "SPARK_MASTER": "local[2]", **env}
    if not env:
        # The local run is `make demo` as users run it: Spark's defaults, generated code and
        # adaptive execution, not the tests' (tests/var_dir.py). The cluster's runs, on the
        # tests' settings, are compared with it row for row.
        options = environ.get("SPARK_SUBMIT_OPTS", "")
        environ["SPARK_SUBMIT_OPTS"] = options.replace(
            environ.get("BDRE_TEST_SPARK_OPTIONS", ""), ""
        ).strip()
        # Else the runs compared row for row would all be on the tests' settings.
        assert "spark.sql.adaptive" not in environ["SPARK_SUBMIT_OPTS"], options
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput"], env=environ, check=True, capture_output=True)
    # In a process group of its own: on a timeout the group goes (the demo's embedded worker
    # and its Spark drivers with it), not the command alone, which would leave them running.
    demo = subprocess.Popen(
        # A 5-second timer: the second drop waits for a tick, not for the default 20 s.
        [
            *manage,
            "demo",
            "--run",
            "--timeout",
            str(WAIT),
            "--files",
            "2",
            "--events",
            "400",
            "--scan-seconds",
            "5",
        ],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = demo.communicate(timeout=KILL_AFTER)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        out, err = demo.communicate()
        err += f"\n(killed after {KILL_AFTER} s with its process group)"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(demo.pid, signal.SIGKILL)  # whatever of the group outlived the demo
    worker_log = var_dir / "demo-worker.log"
    log = err + (worker_log.read_text() if worker_log.exists() else "")
    return DemoRun(var_dir, demo.returncode, out, log)
