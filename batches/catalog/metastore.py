"""The published catalog's metastore: BDRE's names for its tables in it (``t<team>_<db>.
<table>``), its configuration (embedded Derby, or PostgreSQL in a schema of its own with its
DDL), the notebook snippet that reaches it, and the short-lived Spark session the sync runs
in. psycopg2 for the schema, Spark only for the session."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from batches.models import HiveTable
from bdre import s3a_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType


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


def type_ddl(data_type: DataType) -> str:
    """A Spark type as DDL, every field name backquoted (``simpleString`` leaves them bare,
    which a name with a dot or a space breaks)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        fields = ",".join(f"{quote(f.name)}:{type_ddl(f.dataType)}" for f in data_type.fields)
        return f"struct<{fields}>"
    if isinstance(data_type, ArrayType):
        return f"array<{type_ddl(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"map<{type_ddl(data_type.keyType)},{type_ddl(data_type.valueType)}>"
    return data_type.simpleString()


def create_partitioned(
    spark: SparkSession,
    name: str,
    schema: StructType,
    *,
    column: str,
    location: str,
    properties: dict[str, str] | None = None,
) -> None:
    """An external Parquet table partitioned by ``column`` whose partitions are only those
    added by name and location (:func:`put_partitions`), never what its folder holds: a
    batch's folder holds attempts that are not published."""
    columns = ", ".join(f"{quote(f.name)} {type_ddl(f.dataType)}" for f in schema.fields)
    props = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in (properties or {}).items())
    spark.sql(
        f"CREATE TABLE {qualified(name)} ({columns}) USING parquet "
        f"PARTITIONED BY ({quote(column)}) LOCATION {sql_string(location)}"
        + (f" TBLPROPERTIES ({props})" if props else "")
    )


def put_partitions(
    spark: SparkSession,
    name: str,
    column: str,
    wanted: dict[int, str],
    present: Iterable[int] = (),
) -> None:
    """The table's partitions made exactly ``wanted`` (batch -> location): a partition
    already there is pointed at its location in one metastore call (a reader planning a
    query sees the old location or the new one), the others added, those not wanted
    dropped (an external table: no file is touched)."""
    present = set(present)
    for batch in sorted(present - set(wanted)):
        spark.sql(
            f"ALTER TABLE {qualified(name)} DROP IF EXISTS PARTITION ({quote(column)}={batch})"
        )
    for batch in sorted(present & set(wanted)):
        spark.sql(
            f"ALTER TABLE {qualified(name)} PARTITION ({quote(column)}={batch}) "
            f"SET LOCATION {sql_string(wanted[batch])}"
        )
    new = sorted(set(wanted) - present)
    for chunk in range(0, len(new), 100):
        added = " ".join(
            f"PARTITION ({quote(column)}={batch}) LOCATION {sql_string(wanted[batch])}"
            for batch in new[chunk : chunk + 100]
        )
        spark.sql(f"ALTER TABLE {qualified(name)} ADD IF NOT EXISTS {added}")


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
    credentials), then the metastore's settings. Not ``processes.step_kinds.spark_session``'s
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
