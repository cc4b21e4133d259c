"""The published catalog: BDRE's tables in a Hive metastore, for a user's own SparkSession
(a notebook, ``spark-submit``, a BI tool) to list and query (docs/operations.md, "The
catalog").

``HiveTable`` rows stay the source of truth; the metastore is a copy that :func:`sync`
brings in line with them, idempotently, from a short-lived Spark session of its own
(:func:`catalog_session`, started by ``manage.py sync_catalog``) that runs BDRE's own DDL and
never a user's SQL. The steps' session keeps its in-memory catalog: a persistent catalog
there would let one team's Spark SQL name another team's tables, and a JVM has only one
catalog implementation.

Names: team ``<id>``'s ``db.table`` is ``t<id>_<db>.<table>`` in the catalog, unique per
team and stable when the team is renamed. The team boundary in the published catalog is the
metastore's and the files' permissions, not BDRE's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Min, Q
from django.utils import timezone

from batches.locations import spark_path
from batches.models import CatalogState, HiveTable
from bdre import s3a_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# The catalog's databases are BDRE's: t<team id>_<db>. Only tables in those are ever dropped.
DATABASE = re.compile(r"t\d+_[a-z0-9_]+")
# Hive names are letters, digits and '_' (and the metastore lowercases them).
NOT_IN_NAME = re.compile(r"[^a-z0-9_]")
# What the sync writes on each table it creates, to know later whether it still matches.
PROPERTY_TABLE_ID = "bdre.table_id"
PROPERTY_LOCATION = "bdre.location"
POSTGRES_DRIVER = "org.postgresql.Driver"
# Hive 2.3's metastore model (package.jdo in the hive-metastore jar).
METASTORE_CLASSES = [
    "MDatabase",
    "MFieldSchema",
    "MType",
    "MTable",
    "MConstraint",
    "MSerDeInfo",
    "MOrder",
    "MColumnDescriptor",
    "MStringList",
    "MStorageDescriptor",
    "MPartition",
    "MIndex",
    "MRole",
    "MRoleMap",
    "MGlobalPrivilege",
    "MDBPrivilege",
    "MTablePrivilege",
    "MPartitionPrivilege",
    "MTableColumnPrivilege",
    "MPartitionColumnPrivilege",
    "MPartitionEvent",
    "MMasterKey",
    "MDelegationToken",
    "MTableColumnStatistics",
    "MPartitionColumnStatistics",
    "MVersionTable",
    "MResourceUri",
    "MFunction",
    "MNotificationLog",
    "MNotificationNextId",
]
# Options of SPARK_CONF the sync's session does not take: it is a classic session, always.
NOT_FROM_SPARK_CONF = ("spark.remote", "spark.api.mode")
# Options the metastore's settings add to (with this separator) rather than replace.
APPENDED = {"spark.driver.extraJavaOptions": " ", "spark.driver.extraClassPath": os.pathsep}
# The password is never printed: the notebook snippet reads it from this variable.
PASSWORD_VARIABLE = "BDRE_METASTORE_PASSWORD"


# --- names ---------------------------------------------------------------------------------


def _hive_name(name: str) -> str:
    return NOT_IN_NAME.sub("_", name.lower())


def catalog_database(team_id: int, dbname: str) -> str:
    """The catalog database of team ``team_id``'s ``dbname``: ``t<id>_<db>``. By the team's
    id, not its name: a renamed team keeps its names, and two teams' ``sales`` never meet."""
    return f"t{team_id}_{_hive_name(dbname)}"


def catalog_name(table: HiveTable) -> str:
    """``t<team>_<db>.<table>``: the name of ``table`` in the published catalog."""
    return f"{catalog_database(table.team_id, table.dbname)}.{_hive_name(table.table_name)}"


def quote(identifier: str) -> str:
    """A Spark SQL identifier, backquoted (a backquote inside is doubled)."""
    return "`" + identifier.replace("`", "``") + "`"


def qualified(name: str) -> str:
    database, _, table = name.partition(".")
    return f"{quote(database)}.{quote(table)}"


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal: Spark reads backslash escapes in literals
    (``spark.sql.parser.escapedStringLiterals`` is off), so both the backslash and the
    quote are escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# --- the metastore's configuration ---------------------------------------------------------


@dataclass(frozen=True)
class PostgresMetastore:
    host: str
    port: int
    database: str
    user: str
    password: str
    schema: str

    @property
    def jdbc_url(self) -> str:
        # currentSchema: the metastore's tables in a schema of their own, beside BDRE's.
        return (
            f"jdbc:postgresql://{self.host}:{self.port}/{self.database}?currentSchema={self.schema}"
        )


def postgres_metastore() -> PostgresMetastore | None:
    """``BDRE_METASTORE_URL`` (``postgres://user[:password]@host[:port]/db``) and
    ``BDRE_METASTORE_SCHEMA``; None for the embedded Derby metastore."""
    url = settings.BDRE_METASTORE_URL
    if not url:
        return None
    parts = urlsplit(url)
    database = parts.path.lstrip("/")
    if parts.scheme not in ("postgres", "postgresql") or not parts.hostname or not database:
        raise ImproperlyConfigured(
            f"BDRE_METASTORE_URL must be postgres://user@host:port/database, got {url!r}"
        )
    schema = settings.BDRE_METASTORE_SCHEMA
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
        raise ImproperlyConfigured(
            f"BDRE_METASTORE_SCHEMA must be a lower-case identifier, got {schema!r}"
        )
    return PostgresMetastore(
        host=parts.hostname,
        port=parts.port or 5432,
        database=database,
        user=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        schema=schema,
    )


def metastore_conf() -> dict[str, str]:
    """The Spark options of a session on the published catalog: a Hive-enabled session on
    an embedded Derby metastore under the warehouse, or on PostgreSQL with
    ``BDRE_METASTORE_URL``. Spark's own Hive 2.3 client and the wheel's jars (Derby,
    DataNucleus) do the work; DataNucleus creates the metastore's tables on first use."""
    conf = {
        "spark.sql.catalogImplementation": "hive",
        # Where CREATE DATABASE puts a database's folder; the tables are external, at their
        # BDRE locations, and nothing is written here.
        "spark.sql.warehouse.dir": str(settings.BDRE_WAREHOUSE / "catalog"),
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }
    postgres = postgres_metastore()
    if postgres is None:
        metastore_db = settings.BDRE_WAREHOUSE / "metastore_db"
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={metastore_db};create=true"
        )
        # Derby writes derby.log into its system home, the working directory by default.
        conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={settings.VAR_DIR}"
        return conf
    jar = settings.BDRE_METASTORE_JDBC_JAR
    conf |= {
        "spark.hadoop.javax.jdo.option.ConnectionURL": postgres.jdbc_url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": POSTGRES_DRIVER,
        "spark.hadoop.javax.jdo.option.ConnectionUserName": postgres.user,
        # On the driver's own class path: DataNucleus loads the driver class by its name.
        "spark.driver.extraClassPath": jar,
        # Every metastore table created when the metastore opens. Created lazily (the
        # default), the first CREATE TABLE deadlocks on PostgreSQL: DataNucleus adds a
        # table's foreign keys to TBLS on a connection of its own while the transaction
        # that inserted into TBLS holds its lock.
        "spark.hadoop.datanucleus.autoStartMechanism": "Classes",
        "spark.hadoop.datanucleus.autoStartClassNames": ",".join(
            f"org.apache.hadoop.hive.metastore.model.{name}" for name in METASTORE_CLASSES
        ),
    }
    if postgres.password:
        conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] = postgres.password
    return conf


def notebook_snippet() -> str:
    """The lines a user pastes into a notebook for a SparkSession on the published catalog
    (``manage.py sync_catalog --print-conf``). The password, if any, is read from
    ``BDRE_METASTORE_PASSWORD``: it is never printed."""
    conf = metastore_conf()
    secret = any(key.endswith("ConnectionPassword") for key in conf)
    lines = ["import os", ""] if secret else []
    lines += ["from pyspark.sql import SparkSession", "", "spark = (", "    SparkSession.builder"]
    for key, value in conf.items():
        shown = json.dumps(value)  # a Python string literal too, in double quotes
        if key.endswith("ConnectionPassword"):
            shown = f"os.environ[{json.dumps(PASSWORD_VARIABLE)}]"
        lines.append(f"    .config({json.dumps(key)}, {shown})")
    lines += ["    .getOrCreate()", ")"]
    return "\n".join(lines) + "\n"


def failure_hint() -> str:
    """What a failed sync most likely means, for its error message."""
    if postgres_metastore() is not None:
        return "see the PostgreSQL metastore's settings (BDRE_METASTORE_*)"
    return (
        "with the embedded Derby metastore this is most likely another process holding it "
        "(a notebook's session: Derby admits one JVM at a time; stop it, or use a PostgreSQL "
        f"metastore); Derby's own log is {settings.VAR_DIR / 'derby.log'}"
    )


def ensure_postgres_schema() -> None:
    """Create the PostgreSQL metastore's schema if missing (DataNucleus creates the tables in
    it, not the schema); refuse a database that already holds another schema's metastore.

    DataNucleus looks a metastore's tables up in every schema of its database, so a second
    metastore beside a first takes the first one's tables for its own and fails to open
    ("Unable to instantiate SessionHiveMetaStoreClient"). Its settings that would scope it to
    one schema also rename Hive's tables (``datanucleus.mapping.Schema`` upper-cases the
    schema; ``identifier.case=MixedCase`` creates ``Skewed_STRING_LIST``, not Hive's
    ``SKEWED_STRING_LIST``): one metastore per database, said plainly before Spark starts."""
    postgres = postgres_metastore()
    if postgres is None:
        return
    import psycopg2
    from psycopg2 import sql

    where = f"database {postgres.database} on {postgres.host}:{postgres.port}"
    try:
        connection = psycopg2.connect(
            host=postgres.host,
            port=postgres.port,
            dbname=postgres.database,
            user=postgres.user,
            password=postgres.password or None,
        )
    except psycopg2.OperationalError as exc:
        raise ImproperlyConfigured(
            f"cannot connect to the PostgreSQL metastore's {where} as {postgres.user!r}: "
            "check BDRE_METASTORE_URL (host, port, database, user) and BDRE_METASTORE_PASSWORD"
        ) from exc
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relname = 'DBS' AND c.relkind IN ('r', 'p') AND n.nspname <> %s "
                "ORDER BY 1",
                [postgres.schema],
            )
            others = [row[0] for row in cursor.fetchall()]
            if others:
                raise ImproperlyConfigured(
                    f"the {where} already holds a Hive metastore in schema {others[0]!r}: a "
                    f"second one in schema {postgres.schema!r} would take its tables for its "
                    "own (Hive's DataNucleus looks them up in every schema of a database). "
                    "Give this installation's metastore a database of its own in "
                    "BDRE_METASTORE_URL (CREATE DATABASE ...; docs/operations.md, 'The catalog')"
                )
            cursor.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(postgres.schema))
            )
    finally:
        connection.close()


def catalog_conf() -> dict[str, str]:
    """The sync's session options: the installation's ``SPARK_CONF`` over the S3A
    connector's (tables on ``BDRE_TABLE_STORE`` are ``s3a://`` folders, :mod:`bdre.s3a_jars`),
    then the metastore's settings."""
    chosen = {k: v for k, v in settings.SPARK_CONF.items() if not k.startswith(NOT_FROM_SPARK_CONF)}
    s3a = s3a_jars.spark_conf(settings.BDRE_SPARK_JARS_DIR, chosen)
    jars = {"spark.jars": s3a.pop("spark.jars")} if s3a else {}
    conf = {
        "spark.app.name": "bdre-catalog-sync",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "1g",
        **s3a,
        **chosen,
        **jars,
    }
    # A JVM that lives seconds: the quick compiler only (about a fifth faster to sync; the
    # optimising one never pays off in a run this short).
    sync_only = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
    for key, value in [*metastore_conf().items(), *sync_only.items()]:
        if conf.get(key) and key in APPENDED:
            value = conf[key] + APPENDED[key] + value
        conf[key] = value
    return conf


def catalog_session() -> SparkSession:
    """A classic SparkSession on the published catalog for the sync: ``local[1]`` (it only
    lists folders and runs DDL), the installation's ``SPARK_CONF`` (object store
    credentials), then the metastore's settings. Not ``processes.jobs.spark_session``'s
    session: that one is the steps' sandbox, with an in-memory catalog. Stop it when done:
    an embedded Derby metastore admits one JVM at a time."""
    from pyspark.sql import SparkSession

    # PySpark makes a Spark Connect client whenever SPARK_REMOTE is set, and a Connect
    # client has no metastore of its own: this process (the sync's) is always classic.
    os.environ.pop("SPARK_REMOTE", None)
    ensure_postgres_schema()
    builder = SparkSession.builder.master("local[1]")
    for key, value in catalog_conf().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# --- the sync -------------------------------------------------------------------------------


@dataclass
class SyncSummary:
    created: list[str] = field(default_factory=list)
    # Dropped and created again: moved, another id, other columns.
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # no HiveTable row any more
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why
    partitions: dict[str, list[str]] = field(default_factory=dict)  # name -> batch_id=<n>, ...
    added: dict[str, list[str]] = field(default_factory=dict)  # partitions new to the catalog
    removed: dict[str, list[str]] = field(default_factory=dict)  # partitions gone from it

    def lines(self) -> list[str]:
        out = []
        for name in sorted(self.partitions):
            if name in self.created:
                what = "created"
            elif name in self.replaced:
                what = "replaced"
            else:
                what = "unchanged"
            change = [f"+{p}" for p in self.added.get(name, [])]
            change += [f"-{p}" for p in self.removed.get(name, [])]
            count = len(self.partitions[name])
            out.append(
                f"{name}: {what}, {count} partition{'s' * (count != 1)}"
                + (f" ({', '.join(change)})" if change else "")
            )
        out += [
            f"{name}: dropped (no table in BDRE any more; files untouched)" for name in self.dropped
        ]
        out += [f"{name}: skipped, {reason}" for name, reason in sorted(self.skipped.items())]
        return out


def _wanted(tables: Iterable[HiveTable], summary: SyncSummary) -> dict[str, HiveTable]:
    """The catalog name of each table to publish; a view, a table without location and a
    second table with the same catalog name (``a-b`` and ``a_b``) are skipped."""
    wanted: dict[str, HiveTable] = {}
    for table in sorted(tables, key=lambda t: t.pk):
        name = catalog_name(table)
        if table.type == HiveTable.TableType.VIEW:
            summary.skipped[name] = "a view: only tables with files are published"
        elif not table.location:
            summary.skipped[name] = "no location"
        elif name in wanted:
            summary.skipped[f"{name} (table {table.pk})"] = (
                f"the same catalog name as table {wanted[name].pk} ({wanted[name]})"
            )
        else:
            wanted[name] = table
    return wanted


def _catalog_tables(spark: SparkSession) -> dict[str, tuple[str, dict[str, str]]]:
    """The tables in the catalog's BDRE databases: name -> (table type, properties)."""
    found = {}
    for database in spark.catalog.listDatabases():
        if not DATABASE.fullmatch(database.name):
            continue
        for table in spark.catalog.listTables(database.name):
            name = f"{database.name}.{table.name}"
            rows = spark.sql(f"SHOW TBLPROPERTIES {qualified(name)}").collect()
            found[name] = (table.tableType or "", {r["key"]: r["value"] for r in rows})
    return found


def _partitions(spark: SparkSession, name: str) -> list[str]:
    rows = spark.sql(f"SHOW PARTITIONS {qualified(name)}").collect()
    return sorted((r[0] for r in rows), key=_partition_order)


def _partition_order(partition: str) -> tuple[int, str]:
    value = partition.rpartition("=")[2]
    return (int(value), "") if value.isdigit() else (sys.maxsize, partition)


def _files_schema(spark: SparkSession, location: str) -> str | None:
    """The schema Spark reads at ``location`` (the columns and the ``batch_id`` partition
    column, as the steps read the table), or None when there is no Parquet file yet."""
    from pyspark.errors import AnalysisException

    try:
        return spark.read.parquet(location).schema.simpleString()
    except AnalysisException:
        return None


def sync(spark: SparkSession, tables: Iterable[HiveTable]) -> SyncSummary:
    """Make the catalog's BDRE databases hold exactly ``tables`` (all of them, normally):
    each one an external Parquet table at its location, partitioned by ``batch_id`` as its
    folders are, with the metastore's partitions exactly the folders there are. Idempotent:
    a table already right is left as it is; a re-run's partition keeps its entry (its files
    were replaced in place); a removed folder's entry goes. A table whose catalog entry has
    another location, another id or another schema is dropped and created again; a table in
    a BDRE database that is no HiveTable any more is dropped. Only external tables are ever
    dropped, so no file is touched."""
    summary = SyncSummary()
    wanted = _wanted(tables, summary)
    existing = _catalog_tables(spark)
    for database in sorted({name.partition(".")[0] for name in wanted}):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
    for name, table in wanted.items():
        _sync_table(spark, name, table, existing.get(name), summary)
    for name, (table_type, _) in sorted(existing.items()):
        if name in wanted:
            continue
        if table_type.upper() != "EXTERNAL":
            summary.skipped[name] = f"a {table_type.lower()} table not made by BDRE: left alone"
            continue
        spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
        summary.dropped.append(name)
    _drop_empty_databases(spark, {name.partition(".")[0] for name in wanted})
    return summary


def _sync_table(
    spark: SparkSession,
    name: str,
    table: HiveTable,
    existing: tuple[str, dict[str, str]] | None,
    summary: SyncSummary,
) -> None:
    location = spark_path(table.location)
    schema = _files_schema(spark, location)
    if schema is None and existing is None:
        summary.skipped[name] = f"no Parquet files at {table.location} yet"
        return
    before: list[str] = []
    if existing is not None:
        _, properties = existing
        same = properties.get(PROPERTY_TABLE_ID) == str(table.pk) and (
            properties.get(PROPERTY_LOCATION) == table.location
        )
        if same and schema is not None:
            same = spark.table(qualified(name)).schema.simpleString() == schema
        if same:
            before = _partitions(spark, name)
        elif schema is None:
            # Moved or reused id, and nothing at the new location to read a schema from.
            spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
            summary.dropped.append(name)
            summary.skipped[name] = f"no Parquet files at {table.location} yet"
            return
        else:
            spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
            summary.replaced.append(name)
            existing = None
    if existing is None:
        # Columns and the batch_id partition column are inferred from the folders, as the
        # steps read them; the properties say which BDRE table it is, for the next sync.
        spark.sql(
            f"CREATE TABLE {qualified(name)} USING parquet LOCATION {sql_string(location)} "
            f"TBLPROPERTIES ({sql_string(PROPERTY_TABLE_ID)} = {sql_string(str(table.pk))}, "
            f"{sql_string(PROPERTY_LOCATION)} = {sql_string(table.location)})"
        )
        if name not in summary.replaced:
            summary.created.append(name)
    else:
        summary.unchanged.append(name)
    if table.batch_id_partition_col and _is_partitioned(spark, name):
        # Adds the folders the metastore lacks and drops the entries whose folder is gone.
        spark.sql(f"MSCK REPAIR TABLE {qualified(name)} SYNC PARTITIONS")
        after = _partitions(spark, name)
    else:
        after = []
    summary.partitions[name] = after
    added = [p for p in after if p not in before]
    removed = [p for p in before if p not in after]
    if added:
        summary.added[name] = added
    if removed:
        summary.removed[name] = removed


def _is_partitioned(spark: SparkSession, name: str) -> bool:
    database, _, table = name.partition(".")
    return any(c.isPartition for c in spark.catalog.listColumns(table, database))


def _drop_empty_databases(spark: SparkSession, wanted: set[str]) -> None:
    for database in spark.catalog.listDatabases():
        name = database.name
        if DATABASE.fullmatch(name) and name not in wanted and not spark.catalog.listTables(name):
            spark.sql(f"DROP DATABASE IF EXISTS {quote(name)}")


def sync_all(spark: SparkSession) -> SyncSummary:
    return sync(spark, HiveTable.objects.all())


# --- when it runs: the change check and the periodic task's service -------------------------


@dataclass(frozen=True)
class Mark:
    """What the database says at the start of a sync, recorded when it succeeds: the next
    check compares against it."""

    at: datetime
    tables: str  # a digest of every table's id, team, name and location
    run_watermark: int  # the lowest run id that can still end after ``at``


def tables_digest() -> str:
    rows = HiveTable.objects.order_by("pk").values_list(
        "pk", "team_id", "dbname", "table_name", "location", "type"
    )
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()


def _run_watermark() -> int:
    # A run that ends after now is running now or starts later: its id is at least the
    # oldest running run's, or above the highest id so far. Both are index look-ups, so
    # the check never scans the runs.
    from processes.models import ExecState, InstanceExec

    running = InstanceExec.objects.filter(exec_state_id=ExecState.RUNNING).aggregate(Min("pk"))
    if running["pk__min"] is not None:
        return int(running["pk__min"])
    last = InstanceExec.objects.order_by("-pk").values_list("pk", flat=True).first()
    return (last or 0) + 1


def mark() -> Mark:
    return Mark(at=timezone.now(), tables=tables_digest(), run_watermark=_run_watermark())


def state() -> CatalogState:
    found, _ = CatalogState.objects.get_or_create(pk=1)
    return found


def record_sync(started: Mark, summary: SyncSummary) -> None:
    CatalogState.objects.update_or_create(
        pk=1,
        defaults={
            "synced_at": started.at,
            "tables_digest": started.tables,
            "run_watermark": started.run_watermark,
            "summary": summary.lines(),
            "error": "",
        },
    )


def record_failure(error: str) -> None:
    CatalogState.objects.update_or_create(pk=1, defaults={"error": error[-4000:]})


def why_sync() -> str | None:
    """Why the catalog needs a sync now, or None: never synced, a table registered, moved or
    deleted, a step run that wrote a partition ended since, or the last sync is older than
    ``BDRE_CATALOG_RESYNC_SECONDS`` (a folder removed outside BDRE leaves no trace in the
    database). A cheap database check: the periodic task runs it every tick."""
    from processes.models import InstanceExec

    current = state()
    if current.synced_at is None:
        # Nothing to publish yet: no JVM for an empty catalog.
        return "never synced" if HiveTable.objects.exists() else None
    if current.tables_digest != tables_digest():
        return "tables registered, moved or deleted"
    wrote = (
        InstanceExec.objects.filter(pk__gte=current.run_watermark, end_ts__gte=current.synced_at)
        .exclude(outputs=[])
        .exists()
    )
    if wrote:
        return "step runs wrote partitions"
    if timezone.now() - current.synced_at > timedelta(seconds=settings.BDRE_CATALOG_RESYNC_SECONDS):
        return f"last sync more than {settings.BDRE_CATALOG_RESYNC_SECONDS} s ago"
    return None


def _claim(seconds: int) -> bool:
    # One sync at a time, across workers and hosts: an embedded Derby metastore admits one
    # JVM, and two syncs would race on the same DDL. A lease, so that a killed sync does not
    # hold it for ever.
    now = timezone.now()
    state()
    return bool(
        CatalogState.objects.filter(Q(running_until__isnull=True) | Q(running_until__lt=now))
        .filter(pk=1)
        .update(running_until=now + timedelta(seconds=seconds))
    )


def _release() -> None:
    CatalogState.objects.filter(pk=1).update(running_until=None)


# The sync's subprocess ends after this long (a lease as long, plus a margin).
SYNC_TIMEOUT_SECONDS = 900


def sync_command() -> list[str]:
    # python -m django needs no manage.py on disk (the image holds the installed package).
    return [sys.executable, "-m", "django", "sync_catalog"]


@dataclass(frozen=True)
class Outcome:
    ran: bool
    reason: str
    output: str = ""


def sync_if_changed(*, force: bool = False) -> Outcome:
    """The periodic task's service: when :func:`why_sync` says so (or ``force``), run
    ``manage.py sync_catalog`` in a process of its own, which starts its session, syncs and
    exits (so its JVM never holds an embedded metastore between syncs)."""
    if not settings.BDRE_CATALOG:
        return Outcome(False, "BDRE_CATALOG is off")
    reason = "forced" if force else why_sync()
    if reason is None:
        return Outcome(False, "nothing changed since the last sync")
    if not _claim(SYNC_TIMEOUT_SECONDS + 60):
        return Outcome(False, "another sync is running")
    try:
        env = {"DJANGO_SETTINGS_MODULE": "bdre.settings", **os.environ}
        done = subprocess.run(
            sync_command(),
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=SYNC_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        record_failure(f"sync_catalog did not end in {SYNC_TIMEOUT_SECONDS} s")
        raise
    finally:
        _release()
    if done.returncode != 0:
        error = (done.stderr or done.stdout)[-4000:]
        record_failure(error)
        raise RuntimeError(f"sync_catalog failed ({reason}): {error}")
    return Outcome(True, reason, done.stdout)


SYNC_TASK = "batches.tasks.sync_catalog"
SYNC_SCHEDULE_NAME = "bdre: sync the published catalog"


def ensure_sync_schedule() -> None:
    """Beat's periodic check (``BDRE_CATALOG_SYNC_SECONDS``) on the default queue: the sync
    is a process of its own, so it holds none of the Spark queue's slots (one Spark step
    each) while it runs. Disabled when ``BDRE_CATALOG`` is off. Idempotent."""
    from bdre.beat import ensure_interval_task

    ensure_interval_task(
        SYNC_SCHEDULE_NAME,
        SYNC_TASK,
        settings.BDRE_CATALOG_SYNC_SECONDS,
        queue=settings.BDRE_QUEUE,
        enabled=settings.BDRE_CATALOG,
    )
