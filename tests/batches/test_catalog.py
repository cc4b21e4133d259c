"""The published catalog (batches/catalog/, docs/operations.md "The catalog"): names, the
metastore's settings, when the periodic task syncs, and, with real JVMs in processes of
their own, `manage.py sync_catalog` and a notebook's SparkSession configured with the lines
it prints (`--print-conf`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from batches import catalog, locations
from batches.catalog import sync as catalog_sync
from batches.catalog import trigger
from batches.models import CatalogState, HiveTable
from tests.helpers.factories import (
    BatchFactory,
    BusDomainFactory,
    HiveTableFactory,
    InstanceExecFactory,
    StepFactory,
    TeamFactory,
)
from tests.helpers.machine import skip_unless_required
from tests.helpers.spark import user_environment

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_JAR = Path("/usr/share/java/postgresql.jar")
METASTORE_URL = os.environ.get("BDRE_TEST_METASTORE_URL", "postgres://postgres@127.0.0.1:5432/test")


# --- names and SQL text (no Spark) -----------------------------------------------------------


@pytest.mark.django_db
def test_a_tables_catalog_name_is_its_teams_id_its_database_and_its_name_in_lower_case():
    team = TeamFactory(name="Sales Team")
    table = HiveTableFactory(
        bus_domain=BusDomainFactory(team=team), dbname="Raw-Data", table_name="Orders"
    )
    assert catalog.catalog_name(table) == f"t{team.pk}_raw_data.orders"
    team.name = "Renamed"
    team.save()
    table.refresh_from_db()
    assert catalog.catalog_name(table) == f"t{team.pk}_raw_data.orders"


@pytest.mark.django_db
def test_two_teams_sales_orders_have_two_catalog_names():
    first, second = (
        HiveTableFactory(bus_domain=BusDomainFactory(), dbname="sales", table_name="orders")
        for _ in range(2)
    )
    assert catalog.catalog_name(first) != catalog.catalog_name(second)
    assert catalog.catalog_name(first).endswith("_sales.orders")


def test_a_location_is_escaped_for_a_sql_string_literal():
    assert catalog.sql_string("/w/o'brien") == r"'/w/o\'brien'"
    assert catalog.sql_string("C:\\x\\'y") == r"'C:\\x\\\'y'"
    assert catalog.quote("a`b") == "`a``b`"
    assert catalog.qualified("t1_sales.orders") == "`t1_sales`.`orders`"
    assert locations.spark_path("s3://bucket/t") == "s3a://bucket/t"


@pytest.mark.django_db
def test_a_view_a_table_without_location_and_a_name_taken_twice_are_not_published():
    app = BusDomainFactory()
    kept = HiveTableFactory(bus_domain=app, dbname="a-b", table_name="t")
    same_name = HiveTableFactory(bus_domain=app, dbname="a_b", table_name="t")
    view = HiveTableFactory(bus_domain=app, table_name="v", type=HiveTable.TableType.VIEW)
    nowhere = HiveTableFactory(bus_domain=app, table_name="n", location="")
    summary = catalog.SyncSummary()
    wanted = catalog_sync._wanted([view, same_name, nowhere, kept], summary)
    assert list(wanted.values()) == [kept]
    assert set(summary.skipped) == {
        catalog.catalog_name(view),
        catalog.catalog_name(nowhere),
        f"{catalog.catalog_name(same_name)} (table {same_name.pk})",
    }


def test_the_embedded_metastore_is_derby_under_the_warehouse(settings, tmp_path):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    settings.VAR_DIR = tmp_path
    settings.BDRE_METASTORE_URL = ""
    conf = catalog.metastore_conf()
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        f"jdbc:derby:;databaseName={tmp_path}/warehouse/metastore_db;create=true"
    )
    assert conf["spark.driver.extraJavaOptions"] == f"-Dderby.system.home={tmp_path}"


def test_the_sync_reads_tables_on_s3_with_the_fetched_connector(settings, tmp_path):
    """Tables on BDRE_TABLE_STORE are s3a:// folders: the sync's session reads them with the
    jars `make s3a-jars` fetched, as the steps' sessions do; the installation's own S3A
    settings win, and its own hadoop-aws replaces them."""
    from bdre import s3a_jars

    for name in s3a_jars.JARS:
        (tmp_path / name).write_bytes(b"jar")
    settings.BDRE_SPARK_JARS_DIR = str(tmp_path)
    settings.SPARK_CONF = {"spark.hadoop.fs.s3a.connection.timeout": "1000"}
    conf = catalog.catalog_conf()
    assert conf["spark.jars"].split(",") == [str(tmp_path / name) for name in s3a_jars.JARS]
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.connection.timeout"] == "1000"
    settings.SPARK_CONF = {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0"}
    assert "spark.jars" not in catalog.catalog_conf()


def test_a_postgresql_metastore_has_its_schema_and_its_password_is_never_printed(settings):
    settings.BDRE_METASTORE_URL = "postgres://hive:s3cr%40t@db.example:6432/bdre"
    settings.BDRE_METASTORE_SCHEMA = "hive_metastore"
    settings.BDRE_METASTORE_JDBC_JAR = "/opt/pg.jar"
    conf = catalog.metastore_conf()
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        "jdbc:postgresql://db.example:6432/bdre?currentSchema=hive_metastore"
    )
    assert conf["spark.hadoop.javax.jdo.option.ConnectionUserName"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] == "s3cr@t"
    assert conf["spark.driver.extraClassPath"] == "/opt/pg.jar"
    snippet = catalog.notebook_snippet()
    assert "s3cr" not in snippet
    assert 'os.environ["BDRE_METASTORE_PASSWORD"]' in snippet
    compile(snippet, "snippet", "exec")  # it is Python a user can paste


@pytest.mark.parametrize(
    "url", ["mysql://h/db", "postgres:///db", "postgres://h:5432/"], ids=["mysql", "host", "db"]
)
def test_a_metastore_url_that_is_no_postgresql_database_is_refused(settings, url):
    from django.core.exceptions import ImproperlyConfigured

    settings.BDRE_METASTORE_URL = url
    with pytest.raises(ImproperlyConfigured, match="BDRE_METASTORE_URL"):
        catalog.metastore_conf()


# --- when the periodic task syncs (no Spark: the subprocess is not started) ----------------


@pytest.mark.django_db
def test_the_periodic_task_syncs_only_after_a_change(monkeypatch, settings):
    settings.BDRE_CATALOG_RESYNC_SECONDS = 3600
    started: list[list[str]] = []

    def run(argv, **kwargs):
        started.append(argv)
        return subprocess.CompletedProcess(argv, 0, "synced", "")

    monkeypatch.setattr(trigger.subprocess, "run", run)
    assert catalog.why_sync() is None  # no table: nothing to publish, no JVM
    table = HiveTableFactory()
    assert catalog.why_sync() == "never synced"
    catalog.record_sync(catalog.mark(), catalog.SyncSummary())
    assert catalog.sync_if_changed() == catalog.Outcome(
        False, "nothing changed since the last sync"
    )

    HiveTableFactory()
    assert catalog.sync_if_changed().reason == "tables registered, moved or deleted"
    assert started == [catalog.sync_command()]
    catalog.record_sync(catalog.mark(), catalog.SyncSummary())
    table.location = "/elsewhere"
    table.save()
    assert catalog.why_sync() == "tables registered, moved or deleted"
    catalog.record_sync(catalog.mark(), catalog.SyncSummary())

    # A step run that wrote a partition and ended after the sync started; one without
    # outputs does not count.
    step = StepFactory()
    InstanceExecFactory(process=step, end_ts=timezone.now(), outputs=[])
    assert catalog.why_sync() is None
    InstanceExecFactory(process=step, end_ts=timezone.now(), outputs=["sales.orders"])
    assert catalog.why_sync() == "step runs wrote partitions"
    catalog.record_sync(catalog.mark(), catalog.SyncSummary())
    assert catalog.why_sync() is None

    CatalogState.objects.update(synced_at=timezone.now() - timedelta(hours=2))
    assert catalog.why_sync() == "last sync more than 3600 s ago"


@pytest.mark.django_db
def test_one_sync_at_a_time_and_none_when_the_catalog_is_off(monkeypatch, settings):
    monkeypatch.setattr(trigger.subprocess, "run", lambda *a, **k: pytest.fail("synced"))
    settings.BDRE_CATALOG = False
    assert catalog.sync_if_changed(force=True) == catalog.Outcome(False, "BDRE_CATALOG is off")
    settings.BDRE_CATALOG = True
    assert trigger._claim(60)
    assert catalog.sync_if_changed(force=True) == catalog.Outcome(False, "another sync is running")


@pytest.mark.django_db
def test_a_failed_sync_is_recorded_and_releases_the_lease(monkeypatch):
    monkeypatch.setattr(
        trigger.subprocess,
        "run",
        lambda argv, **k: subprocess.CompletedProcess(argv, 1, "", "Another instance of Derby"),
    )
    with pytest.raises(RuntimeError, match="Another instance of Derby"):
        catalog.sync_if_changed(force=True)
    assert CatalogState.objects.get().error == "Another instance of Derby"
    assert CatalogState.objects.get().running_until is None


# --- the real thing: sync_catalog and a notebook's session, each a JVM of its own -----------


def write_partition(location: Path, batch_id: int, rows: list[tuple[int, str]]) -> None:
    """A batch's partition as ``spark_io.write_batch`` leaves it: Parquet files in
    ``<location>/batch_id=<n>`` (a re-run replaces the folder's files)."""
    folder = location / f"batch_id={batch_id}"
    shutil.rmtree(folder, ignore_errors=True)
    write_partition_file(folder, rows, "part-00000.parquet")


def write_partition_file(folder: Path, rows: list[tuple[int, str]], name: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    ids, items = zip(*rows, strict=True) if rows else ((), ())
    data = pa.table({"id": pa.array(ids, pa.int64()), "item": pa.array(items, pa.string())})
    pq.write_table(data, folder / name)


def publish_partition(table: HiveTable, rows: list[tuple[int, str]], batch_id: int = 0) -> int:
    """A batch's partition as a job publishes it (batches.partitions): written to the
    folder of its attempt, recorded, published in place of the batch's last one (a new
    batch unless ``batch_id``); the batch's id."""
    from batches import partitions

    batch_id = batch_id or BatchFactory(bus_domain=table.bus_domain).pk
    attempt = InstanceExecFactory().pk
    location = partitions.attempt_location(table, batch_id, attempt)
    write_partition_file(Path(location), rows, "part-00000.parquet")
    partitions.record_written(
        table, batch_id=batch_id, step_run_id=attempt, location=location, rows=len(rows), size=1
    )
    partitions.publish(batch_id)
    return batch_id


def manage_env(var_dir: Path, **extra: str) -> dict[str, str]:
    from tests.helpers.workers import database_url

    return user_environment(os.environ, "BDRE_METASTORE") | {
        "DATABASE_URL": database_url(),
        "BDRE_VAR_DIR": str(var_dir),
        "BDRE_WAREHOUSE": str(var_dir / "warehouse"),
        **extra,
    }


def run_sync(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "sync_catalog", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def sync_catalog(env: dict[str, str], *args: str) -> str:
    done = run_sync(env, *args)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    return done.stdout


NOTEBOOK_QUERIES = """
import json


def list_and_query():
    found = {"databases": sorted(d.name for d in spark.catalog.listDatabases())}
    for database in found["databases"]:
        for table in spark.catalog.listTables(database):
            name = f"{database}.{table.name}"
            rows = spark.sql(f"SELECT * FROM {name}").collect()
            found[name] = {
                "type": table.tableType,
                "partitions": [r[0] for r in spark.sql(f"SHOW PARTITIONS {name}").collect()],
                "rows": sorted([r.batch_id, r.id, r.item] for r in rows),
            }
    print("FOUND " + json.dumps(found), flush=True)


list_and_query()
"""

# A notebook that, after the queries above, counts one batch of one table when told: once
# ("look"), or again and again until told otherwise ("loop" ... "idle"); or lists and
# queries every table again ("list"). Each command is answered "DONE <command>" after the
# counts it asked for ("SAW <n>").
READER_LOOP = """
import queue, sys, threading

name, batch = sys.argv[1], int(sys.argv[2])
commands = queue.Queue()
threading.Thread(target=lambda: [commands.put(x.strip()) for x in sys.stdin], daemon=True).start()
looping = False
print("READY", flush=True)
while True:
    command = commands.get() if not looping else None
    if command is None and not commands.empty():
        command = commands.get()
    if command == "stop":
        break
    looping = command == "loop" or (looping and command != "idle")
    if looping or command == "look":
        seen = spark.sql(f"SELECT count(*) FROM {name} WHERE batch_id = {batch}").first()[0]
        print(f"SAW {seen}", flush=True)
    if command == "list":
        list_and_query()
    if command is not None:
        print(f"DONE {command}", flush=True)
spark.stop()
"""


class Reader:
    """A user's own SparkSession built with the printed lines, in a process of its own,
    that ran the queries above (``found``) and counts a batch of a table when told. Killed
    if it has not stopped after ``timeout`` seconds, so that no read waits for ever."""

    def __init__(self, snippet: str, cwd: Path, name: str, batch: int, timeout: float = 900):
        self.log = cwd / "reader.log"
        env = user_environment(os.environ)
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", snippet + NOTEBOOK_QUERIES + READER_LOOP, name, str(batch)],
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self.guard = threading.Timer(timeout, self.process.kill)
        self.guard.daemon = True
        self.guard.start()
        try:
            self.found = json.loads(self._line("FOUND ", skip=True).removeprefix("FOUND "))
            self._line("READY")
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _line(self, starting: str, skip: bool = False) -> str:
        """The reader's next line, which starts with ``starting`` (after lines that do not,
        with ``skip``: what a user's code or a library prints first)."""
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if line.startswith(starting) or not (skip and line):
                break
        assert line.startswith(starting), f"{line!r}: " + self.log.read_text()[-4000:]
        return line.strip()

    def tell(self, command: str) -> list[int]:
        """Send ``command``; the counts it saw until it answered (what "list" found is in
        ``found`` then)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        seen = []
        while (line := self._line("")) != f"DONE {command}":
            if line.startswith("FOUND "):
                self.found = json.loads(line.removeprefix("FOUND "))
                continue
            assert line.startswith("SAW "), f"{line!r}: " + self.log.read_text()[-4000:]
            seen.append(int(line.removeprefix("SAW ")))
        return seen

    def stop(self) -> None:
        """Ask it to stop its session; killed when it cannot be asked or does not stop."""
        try:
            if self.process.poll() is None:
                assert self.process.stdin is not None
                self.process.stdin.write("stop\n")
                self.process.stdin.close()
                self.process.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            pass  # a broken pipe: it is gone or going; the kill below ends it either way
        finally:
            self.guard.cancel()
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()


@pytest.fixture
def lake(tmp_path):
    """Two teams each with ``sales.orders`` (the second's folder has a quote in its path),
    one more table of each team, and one registered table with no files yet. The first
    team's orders are written by attempts and published (batches.partitions); the others
    are tables written outside BDRE, read as their folders are."""
    var = tmp_path / "catalog-var"
    warehouse = var / "warehouse"
    first, second = BusDomainFactory(name="shop"), BusDomainFactory(name="outlet")
    locations = {
        "a": warehouse / f"team-{first.team_id}" / "sales" / "orders",
        "b": warehouse / "o'brien" / "sales" / "orders",
        "c": warehouse / f"team-{first.team_id}" / "sales" / "returns",
        "d": warehouse / f"team-{first.team_id}" / "sales" / "empty",
        "e": warehouse / f"team-{second.team_id}" / "sales" / "returns",
    }
    write_partition(locations["b"], 3, [(10, "fig")])
    write_partition(locations["c"], 1, [(7, "kiwi")])
    write_partition(locations["e"], 1, [(8, "lemon")])
    tables = {
        "a": HiveTableFactory(bus_domain=first, dbname="sales", table_name="orders"),
        "b": HiveTableFactory(bus_domain=second, dbname="sales", table_name="orders"),
        "c": HiveTableFactory(bus_domain=first, dbname="sales", table_name="returns"),
        "d": HiveTableFactory(bus_domain=first, dbname="sales", table_name="empty"),
        "e": HiveTableFactory(bus_domain=second, dbname="sales", table_name="returns"),
    }
    for key, table in tables.items():
        table.location = str(locations[key])
        table.save()
    published = [
        publish_partition(tables["a"], [(1, "apple"), (2, "pear")]),
        publish_partition(tables["a"], [(3, "plum")]),
    ]
    return var, tables, locations, published


@pytest.fixture
def metastore_database():
    """A database of its own on the test's PostgreSQL server for the metastore (the suite's
    passes run side by side on one server, and a database holds one metastore), dropped at
    the end; its URL."""
    if not POSTGRES_JAR.exists():
        skip_unless_required(f"{POSTGRES_JAR} is missing: apt-get install libpostgresql-jdbc-java")
    import psycopg2
    from psycopg2 import sql

    try:
        server = psycopg2.connect(METASTORE_URL)
    except psycopg2.OperationalError as exc:
        skip_unless_required(f"no PostgreSQL at {METASTORE_URL}: {exc}")
    server.autocommit = True  # CREATE/DROP DATABASE cannot run in a transaction
    name = f"bdre_metastore_{uuid.uuid4().hex[:8]}"
    with server.cursor() as cursor:
        cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield METASTORE_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with server.cursor() as cursor:
            cursor.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        server.close()


def schema_tables(url: str) -> dict[str, int]:
    """Schema -> how many tables, in the database at ``url`` (PostgreSQL's own left out)."""
    import psycopg2

    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema, count(*) FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') GROUP BY 1"
        )
        return dict(cursor.fetchall())


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_notebook_on_the_published_catalog_sees_each_sync_and_never_half_a_batch(
    lake, tmp_path, metastore_database
):
    """`sync_catalog` into a metastore on PostgreSQL in a schema of its own (a second
    schema in its database is refused before Spark starts), and a user's own SparkSession
    built with the lines `--print-conf` prints. The notebook lists and queries what the
    first sync created; then the lake changes (a batch added and one removed by hand, a
    table deleted, one moved) while the first team's batch is rebuilt 20 times, and the
    notebook counts that batch without pause through the second sync, then lists and
    queries again. Each sync and the notebook is a JVM of its own, so one notebook does it
    all (the embedded Derby metastore's sync and notebook: tests/cluster/, on the demo's
    tables)."""
    var, tables, locations, (one, two) = lake
    names = {key: catalog.catalog_name(t) for key, t in tables.items()}
    first = manage_env(var, BDRE_METASTORE_URL=metastore_database, BDRE_METASTORE_SCHEMA="prod")
    out = sync_catalog(first)
    assert f"{names['a']}: created, 2 partitions (+batch_id={one}, +batch_id={two})" in out
    assert f"{names['b']}: created, 1 partition (+batch_id=3)" in out
    assert f"{names['d']}: skipped, no Parquet files at {locations['d']} yet" in out
    assert "4 created, 0 replaced, 0 unchanged, 0 dropped, 1 skipped" in out
    assert CatalogState.objects.get().summary  # recorded for the periodic task
    before = schema_tables(metastore_database)
    assert list(before) == ["prod"]  # Hive's tables, in its schema
    assert before["prod"] > 10

    # Staging and production on one database, each with a schema: the second would take
    # the first one's tables for its own and fail deep inside Hive. It is refused first.
    second = first | {"BDRE_METASTORE_SCHEMA": "staging"}
    done = run_sync(second)
    assert done.returncode == 1
    database = metastore_database.rsplit("/", 1)[1]
    assert (
        f"CommandError: the catalog sync cannot start: the database {database} on "
        "127.0.0.1:5432 already holds a Hive metastore in schema 'prod'"
    ) in done.stderr
    assert "a database of its own in BDRE_METASTORE_URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert schema_tables(metastore_database) == before  # nothing created for the second
    state = CatalogState.objects.get(pk=1)
    assert "already holds a Hive metastore in schema 'prod'" in state.error

    # The first one is untouched: a notebook on it reads the tables the first sync published.
    snippet = sync_catalog(first, "--print-conf")
    assert "currentSchema=prod" in snippet
    with Reader(snippet, tmp_path, names["a"], two) as reader:
        found = reader.found
        assert {n.partition(".")[0] for n in (names["a"], names["b"])} <= set(found["databases"])
        assert found[names["a"]] == {
            "type": "EXTERNAL",
            "partitions": [f"batch_id={one}", f"batch_id={two}"],
            "rows": [[one, 1, "apple"], [one, 2, "pear"], [two, 3, "plum"]],
        }
        assert found[names["b"]]["rows"] == [[3, 10, "fig"]]

        # A batch added to team b's table and its batch 3's folder removed by hand; table c
        # is no table of BDRE's any more and table e moved.
        write_partition(locations["b"], 4, [(11, "date")])
        shutil.rmtree(locations["b"] / "batch_id=3")
        tables["c"].delete()
        moved = locations["e"].parent / "returns_v2"
        write_partition(moved, 5, [(9, "melon")])
        tables["e"].location = str(moved)
        tables["e"].save()
        out = read_while_rebuilt(reader, tables["a"], two, lambda: sync_catalog(first))
        assert f"{names['a']}: unchanged, 2 partitions\n" in out
        assert f"{names['b']}: unchanged, 1 partition (+batch_id=4, -batch_id=3)" in out
        assert f"{names['c']}: dropped (no table in BDRE any more; files untouched)" in out
        assert f"{names['e']}: replaced, 1 partition (+batch_id=5)" in out
        assert "0 created, 1 replaced, 2 unchanged, 1 dropped, 1 skipped" in out

        reader.tell("list")
        found = reader.found
    # Batch two as its 19th rebuild published it: the 20th was published after the sync.
    assert found[names["a"]]["rows"] == [[one, 1, "apple"], [one, 2, "pear"]] + [
        [two, 100 + n, f"item 19.{n}"] for n in range(20)
    ]
    assert found[names["b"]]["rows"] == [[4, 11, "date"]]
    assert found[names["e"]]["rows"] == [[5, 9, "melon"]]
    assert names["c"] not in found and names["d"] not in found
    for key in "ce":  # a dropped table's files, a moved table's old ones: untouched
        assert (locations[key] / "batch_id=1" / "part-00000.parquet").exists()


def read_while_rebuilt(reader: Reader, table: HiveTable, batch: int, sync) -> str:
    """The batch rebuilt 20 times, each rebuild's first attempt dying in the middle of its
    write (one of its two files written, its step run failed), its re-run published; the
    catalog synced while the last rebuild's dying attempt lies half-written. The notebook
    counts the batch after every rebuild and without pause while the sync runs: it sees the
    count the catalog published before, then the new one, never a half, never an
    unpublished attempt, never a missing partition. What the sync printed."""
    from batches import partitions
    from processes.models import ExecState

    published, synced, out = 1, [1], ""  # the batch's one row, as the first sync published
    for rebuild in range(1, 21):
        rows = [(100 + n, f"item {rebuild}.{n}") for n in range(rebuild + 1)]
        dying = InstanceExecFactory(exec_state_id=ExecState.FAILED).pk
        location = partitions.attempt_location(table, batch, dying)
        write_partition_file(Path(location), rows[: len(rows) // 2], "part-00000.parquet")
        partitions.record_written(
            table, batch_id=batch, step_run_id=dying, location=location, rows=None, size=1
        )
        if rebuild == 20:
            synced.append(published)  # the half-written attempt is no partition of it
            out = seen_syncing(reader, sync, synced)
        publish_partition(table, rows, batch_id=batch)
        published = len(rows)
        assert reader.tell("look") == [synced[-1]], f"rebuild {rebuild}"
    assert synced == [1, 20]
    return out


def seen_syncing(reader: Reader, sync, synced: list[int]) -> str:
    before, after = synced[-2], synced[-1]
    seen = reader.tell("loop")  # counting, from before the sync starts
    out = sync()
    seen += reader.tell("idle")
    seen += reader.tell("look")  # after the sync: the new count
    assert set(seen) <= {before, after}, seen
    assert seen == sorted(seen, key=[before, after].index), f"never back to the old: {seen}"
    assert seen[0] == before and seen[-1] == after, seen
    print(
        f"while the catalog synced: {len(seen)} counts, {seen.count(before)} of {before}, "
        f"{seen.count(after)} of {after}"
    )
    return out


@pytest.mark.django_db
def test_an_unreachable_postgresql_metastore_is_a_clear_error_before_spark_starts(settings):
    from django.core.management import CommandError, call_command

    settings.BDRE_METASTORE_URL = "postgres://hive:secret@127.0.0.1:1/metastore"
    with pytest.raises(CommandError) as raised:
        call_command("sync_catalog")
    message = str(raised.value)
    assert message.startswith(
        "the catalog sync cannot start: cannot connect to the PostgreSQL metastore's "
        "database metastore on 127.0.0.1:1 as 'hive': check BDRE_METASTORE_URL"
    )
    assert "secret" not in message and "psycopg2" not in message
    assert CatalogState.objects.get(pk=1).error == message


@pytest.mark.django_db
def test_beat_checks_on_the_default_queue_and_not_at_all_when_the_catalog_is_off(settings):
    from django_celery_beat.models import PeriodicTask

    from batches.tasks import sync_catalog as task

    settings.BDRE_CATALOG_SYNC_SECONDS = 30
    catalog.ensure_sync_schedule()
    catalog.ensure_sync_schedule()
    entry = PeriodicTask.objects.get(name=catalog.SYNC_SCHEDULE_NAME)
    assert (entry.task, entry.queue, entry.interval.every, entry.enabled) == (
        task.name,
        settings.BDRE_QUEUE,
        30,
        True,
    )
    settings.BDRE_CATALOG = False
    catalog.ensure_sync_schedule()
    assert not PeriodicTask.objects.get(name=catalog.SYNC_SCHEDULE_NAME).enabled
    assert task() == {"synced": False, "reason": "BDRE_CATALOG is off"}


@pytest.mark.django_db
def test_the_api_and_a_tables_lineage_page_show_its_catalog_name(team):
    from tests.helpers.api import api_as
    from tests.helpers.factories import LineageNodeFactory
    from tests.helpers.pages import client_as

    table = HiveTableFactory(bus_domain=team.application, dbname="Lake", table_name="Out")
    name = f"t{team.group.pk}_lake.out"
    found = api_as(team.viewer).get(f"/api/v1/tables/{table.pk}/").json()
    assert found["catalog_name"] == name
    node = LineageNodeFactory(team=team.group, qualified_name="lake.out")
    page = client_as(team.viewer).get(f"/lineage/nodes/{node.pk}/").content.decode()
    assert f"In the published catalog as <code>{name}</code>" in page
    other = LineageNodeFactory(team=team.group, qualified_name="lake.unregistered")
    page = client_as(team.viewer).get(f"/lineage/nodes/{other.pk}/").content.decode()
    assert "published catalog" not in page
