"""A class-data archive of Spark's JVM (Java's CDS), for the JVMs the suite starts.

The suite starts dozens of Spark JVMs (each test process's session, the workers', the demos',
the syncs', the notebooks', the cluster's daemons and executors), and each spent about 4
CPU-s of its start loading and verifying Spark's classes again. An archive of those classes,
made once by a JVM that ran a small Spark workload (``-XX:ArchiveClassesAtExit``), is mapped
by every later one (``-XX:SharedArchiveFile``; docs/testing.md, "CI").

Java uses the archive only if the JVM's class path is the one it was made with and holds no
folder with files in it: so the tests give Spark their settings as ``-D`` options
(tests/var_dir.py), not in a ``SPARK_CONF_DIR``, which Spark puts first on the class path.
A JVM that cannot use it (another class path, another Java) starts as it would without it.

``python -m tests.helpers.jvm_archive`` (``make spark-classes``) makes it, once per Java and
PySpark; nothing breaks without it."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

# What the archive's JVM runs: the kinds of work the suite's Spark does (files of each
# format, a shuffle, a window, a join, JSON, a cache, SQL, the catalog), so that the
# classes they load are in it.
WORKLOAD = """
import os, sys
from pyspark.sql import SparkSession, Window, functions as F
spark = SparkSession.builder.getOrCreate()
out = sys.argv[1]
df = spark.range(500).withColumn("k", F.col("id") % 7)
df = df.withColumn("s", F.concat(F.lit("x"), F.col("id").cast("string")))
df = df.withColumn("j", F.to_json(F.struct("id", "s")))
df = df.withColumn("p", F.from_json("j", "id long, s string"))
ranked = df.withColumn("r", F.row_number().over(Window.partitionBy("k").orderBy("id")))
ranked = ranked.join(df.groupBy("k").agg(F.count("*").alias("n")), "k", "left")
ranked.write.mode("overwrite").partitionBy("k").parquet(os.path.join(out, "parquet"))
back = spark.read.parquet(os.path.join(out, "parquet")).cache()
back.count()
back.unpersist()
back.createOrReplaceTempView("t")
spark.sql("SELECT k, sum(id), collect_list(s)[0] FROM t WHERE id > 3 GROUP BY k").collect()
df.select("s").write.mode("overwrite").text(os.path.join(out, "text"))
text = spark.read.text(os.path.join(out, "text"))
text.select(F.split("value", "x"), F.input_file_name()).collect()
df.select("id", "s").write.mode("overwrite").csv(os.path.join(out, "csv"), header=True)
spark.read.csv(os.path.join(out, "csv"), header=True).collect()
spark.sql("SHOW SYSTEM FUNCTIONS").collect()
spark.catalog.listTables()
spark.stop()
"""

# How a JVM is told to use it: quietly, as a JVM that cannot (another class path) would
# otherwise print why on its standard output, which some tests read.
USE = "-XX:SharedArchiveFile={path} -Xlog:cds*=off"


def java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path(folder: Path) -> Path | None:
    """Where the archive of this Java and this PySpark is (made or not); None without Java.
    Named after what Java checks it against (its own build, Spark's jars), so that a Java
    updated or a PySpark installed again gets an archive of its own, not one it would
    quietly refuse."""
    runtime = java()
    spec = find_spec("pyspark")
    if runtime is None or spec is None or not spec.submodule_search_locations:
        return None
    checked = [runtime, runtime.parents[1] / "lib" / "server" / "libjvm.so"]
    checked.append(Path(spec.submodule_search_locations[0]) / "jars")
    stamps = [f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in checked if p.exists()]
    key = hashlib.sha256("\n".join(stamps).encode()).hexdigest()
    return folder / f"spark-classes-{version('pyspark')}-{key[:12]}.jsa"


def options(folder: Path) -> str:
    """The JVM options that use the archive, if it was made; else none. None either for a
    path Spark's launcher would split (it splits its options as a shell does), nor for one
    that holds "Xmx" anywhere (mktemp's ``/tmp/tmp.XmxWNKqqqr`` once): Spark's launcher
    refuses daemon options that do, as if they set the heap, and the standalone cluster
    would not start."""
    path = archive_path(folder)
    if path is None or not path.is_file() or "Xmx" in str(path):
        return ""
    if any(c.isspace() or c in "\"'\\" for c in str(path)):
        return ""
    return USE.format(path=path)


def make(folder: Path) -> Path:
    """Make the archive in ``folder`` unless it is there; side by side calls make it once."""
    from pyspark.find_spark_home import _find_spark_home

    target = archive_path(folder)
    if target is None:
        raise RuntimeError("no Java (JAVA_HOME or java on the PATH)")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".spark-classes.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        with tempfile.TemporaryDirectory() as work:
            partial = Path(work) / "classes.jsa"
            script = Path(work) / "workload.py"
            script.write_text(WORKLOAD)
            env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
            dump = f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial}"
            env |= {"SPARK_SUBMIT_OPTS": dump, "PYSPARK_PYTHON": sys.executable}
            spark_submit = Path(_find_spark_home()) / "bin" / "spark-submit"
            command = [
                str(spark_submit),
                "--master",
                "local[2]",
                "--conf",
                "spark.ui.enabled=false",
            ]
            done = subprocess.run(
                [*command, str(script), str(Path(work) / "out")],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0 or not partial.is_file():
                raise RuntimeError(f"spark-submit exited {done.returncode}: {done.stderr[-2000:]}")
            # Whole or not at all: a JVM starting meanwhile maps only a finished archive.
            shutil.move(partial, target.with_suffix(".partial"))
            target.with_suffix(".partial").replace(target)
    return target


def jars_folder() -> Path:
    """The folder the suite keeps its downloaded jars in (tests/var_dir.py)."""
    base = os.environ.get("BDRE_VAR_DIR") or Path(__file__).resolve().parents[2] / "var"
    return Path(os.environ.get("BDRE_SPARK_JARS_DIR") or Path(base) / "jars")


if __name__ == "__main__":
    try:
        print(make(jars_folder()))
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
        # An optimisation only: the suite's JVMs start without it, as before.
        print(f"no class-data archive for Spark's JVMs ({error}); they start without one")
