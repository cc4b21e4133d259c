"""Spark steps on object storage: files read from ``s3a://`` and tables written into a
warehouse on ``s3a://`` (``BDRE_TABLE_STORE``) on a real S3 endpoint (moto_server), through
the S3A connector the project's own set-up fetches (bdre/s3a_jars.py). docs/operations.md,
"S3 / object storage"."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from batches import partitions, tables
from batches.ingest.storage import s3_client
from batches.models import HiveTable
from bdre import s3a_jars
from processes import orchestrator
from processes.step_kinds.spark_session import session_conf
from tests.helpers.factories import HiveTableFactory, grant_root
from tests.helpers.jobs import build_job, callable_step, load_step, scan_step, sql_step
from tests.helpers.machine import skip_unless_required
from tests.helpers.spark import S3A_MISSING, one_jvm_only, published

COMPAT = {f"spark.hadoop.{k}": v for k, v in s3a_jars.COMPAT_HADOOP_CONF.items()}


@pytest.fixture
def jars_dir(tmp_path, settings):
    """Both jars in place (by name, as make s3a-jars leaves them) in a folder of the test's."""
    settings.BDRE_SPARK_JARS_DIR = str(tmp_path / "jars")
    (tmp_path / "jars").mkdir()
    for name in s3a_jars.JARS:
        (tmp_path / "jars" / name).write_bytes(b"jar")
    return tmp_path / "jars"


def test_sessions_take_the_jars_and_the_settings_they_need(jars_dir, settings):
    settings.SPARK_CONF = {}
    conf = session_conf("spark://m:7077")
    assert conf["spark.jars"] == ",".join(str(jars_dir / name) for name in s3a_jars.JARS)
    assert conf.items() >= COMPAT.items()
    assert conf["spark.hadoop.fs.s3a.connection.timeout"] == "200000"


def test_a_connect_server_has_them_on_its_command_line(jars_dir, settings):
    from bdre import spark_cluster
    from processes.management.commands.spark_connect_server import server_conf

    settings.SPARK_CONF = {}
    master = "spark://spark-master:7077"
    argv = spark_cluster.connect_command(master, server_conf(master, "127.0.0.1", 15002))
    jars = ",".join(str(jars_dir / name) for name in s3a_jars.JARS)
    assert argv[argv.index(f"spark.jars={jars}") - 1] == "--conf"
    assert "spark.hadoop.fs.s3a.threads.keepalivetime=60" in argv


def test_the_installations_s3a_settings_and_jars_win(jars_dir, settings):
    settings.SPARK_CONF = {
        "spark.hadoop.fs.s3a.connection.timeout": "5000",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "com.example.Mine",
        "spark.jars": "/opt/jdbc.jar",
    }
    conf = session_conf("local[2]")
    assert conf["spark.hadoop.fs.s3a.connection.timeout"] == "5000"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == "com.example.Mine"
    assert conf["spark.jars"].split(",") == ["/opt/jdbc.jar"] + [
        str(jars_dir / name) for name in s3a_jars.JARS
    ]
    assert conf["spark.hadoop.fs.s3a.multipart.purge.age"] == "86400"


def test_an_installation_with_its_own_hadoop_aws_gets_none_of_them(jars_dir, settings):
    # Spark's usual way with Maven Central: the connector of Spark's own Hadoop version, with
    # whose defaults nothing needs mending.
    settings.SPARK_CONF = {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.4.1"}
    conf = session_conf("local[2]")
    assert "spark.jars" not in conf
    assert not conf.keys() & COMPAT.keys()


def test_no_jars_no_s3a_settings(tmp_path, settings):
    settings.SPARK_CONF = {}
    settings.BDRE_SPARK_JARS_DIR = str(tmp_path / "nothing-fetched")
    assert not session_conf("local[2]").keys() & {"spark.jars", *COMPAT}
    settings.BDRE_SPARK_JARS_DIR = ""  # switched off
    assert not session_conf("local[2]").keys() & {"spark.jars", *COMPAT}


@pytest.mark.django_db
def test_a_table_store_puts_new_tables_on_object_storage(team, settings):
    settings.BDRE_TABLE_STORE = "s3://Lake/warehouse/"
    team_id = team.group.pk
    destination = tables.writable_table(team_id, "sales", "Orders")
    assert destination.location == f"s3a://lake/warehouse/team-{team_id}/sales/orders"
    # Another team's table at the store's root cannot be written around nor into.
    HiveTableFactory(location=f"s3a://lake/warehouse/team-{team_id}/sales")
    with pytest.raises(tables.TableNotWritable, match="inside or around another team's table"):
        tables.writable_table(team_id, "sales", "returns")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("store", "reason"),
    [("/data/tables", "a local folder is BDRE_WAREHOUSE's"), ("s3://lake/../x", "'..'")],
)
def test_a_table_store_that_is_no_object_store_is_refused(team, settings, store, reason):
    settings.BDRE_TABLE_STORE = store
    with pytest.raises(ImproperlyConfigured, match=reason):
        tables.writable_table(team.group.pk, "sales", "orders")


# --- end to end on moto_server ------------------------------------------------------------

ORDERS = {
    "orders-1.csv": b"id,name,amount\n1,ann,2.5\n2,bob,4.0\n",
    "orders-2.csv": b"id,name,amount\n3,ann,1.5\n4,cid,9.5\n5,bob,0.5\n",
}
FAILS: list[int] = []


def fail_once(context):
    if not FAILS:
        FAILS.append(1)
        raise RuntimeError("broke once")
    return {}


@pytest.fixture
def s3_lake(spark, s3_endpoint, team, settings):
    """A bucket granted to the team (landing/ for its files, warehouse/ for its tables), and
    the session's S3A settings for it: per bucket, as an installation sets them in
    SPARK_CONF (spark.hadoop.fs.s3a.bucket.<bucket>.endpoint...)."""
    if S3A_MISSING:
        skip_unless_required(f"no S3A connector: {S3A_MISSING[0]}")
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    client = s3_client(endpoint_url=s3_endpoint, region="us-east-1")
    client.create_bucket(Bucket=bucket)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    options = {
        "endpoint": s3_endpoint,
        "path.style.access": "true",
        "connection.ssl.enabled": "false",
        "access.key": "testing",
        "secret.key": "testing",
    }
    for key, value in options.items():
        hadoop.set(f"fs.s3a.bucket.{bucket}.{key}", value)
    # BDRE's own listing and removal of the tables' partitions (batches.partitions) read
    # them from SPARK_CONF, as an installation sets them there for its sessions.
    settings.SPARK_CONF = {
        **settings.SPARK_CONF,
        **{f"spark.hadoop.fs.s3a.bucket.{bucket}.{k}": v for k, v in options.items()},
    }
    # The scan lists the bucket through the server the superuser granted (its endpoint).
    grant_root(
        team.group,
        f"s3://{bucket}/",
        server_type="s3",
        metainfo=f"endpoint_url={s3_endpoint}\nregion=us-east-1",
    )
    return client, bucket


def pipeline(team, name: str, location: str, table: str, *, fail: bool = False):
    """A scan of ``location`` and a job loading its CSV files into ``table`` and summing
    them per name with Spark SQL into ``<table>_totals`` (then, with ``fail``, a step that
    fails once)."""
    ingest = build_job(team, f"{name}_in", [scan_step(f"{name}_in_0", location)])
    steps = [
        load_step(
            f"{name}_0",
            table,
            format="csv",
            upstream=[ingest],
            schema="id INT, name STRING, amount DOUBLE",
        ),
        sql_step(
            f"{name}_1",
            f"SELECT name, sum(amount) AS total, count(*) AS orders FROM {table} "
            "WHERE batch_id IN ({batch_ids}) GROUP BY name",
            output=f"{table}_totals",
        ),
    ]
    if fail:
        steps.append(callable_step(f"{name}_2", f"{__name__}.fail_once"))
    return ingest, build_job(team, name, steps)


def rows(spark, table: str) -> list[tuple]:
    location = HiveTable.objects.get(table_name=table).location
    df = published(spark, location).drop("batch_id", "source_file")
    return sorted(tuple(r) for r in df.collect())


def keys(client, bucket: str, prefix: str) -> list[str]:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in listed)


# The per-bucket settings are this process's JVM's: a cluster's executors or a Connect
# server have their own configuration (docs/operations.md says what to set there).
@one_jvm_only
@pytest.mark.django_db
def test_steps_read_and_write_a_warehouse_on_s3(team, spark, s3_lake, tmp_path, settings):
    client, bucket = s3_lake
    team_id = team.group.pk

    # The same files through a local landing and the local warehouse first.
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing = tmp_path / "landing"
    landing.mkdir()
    for name, data in ORDERS.items():
        (landing / name).write_bytes(data)
    grant_root(team.group, landing)
    local_in, local = pipeline(team, "local", landing.as_uri(), "lake.orders_local")
    assert orchestrator.run_job(local_in.pk).succeeded
    assert orchestrator.run_job(local.pk).succeeded
    settings.BDRE_TABLE_STORE = f"s3://{bucket}/warehouse"

    for name, data in ORDERS.items():
        client.put_object(Bucket=bucket, Key=f"landing/{name}", Body=data)
    s3_in, s3 = pipeline(team, "s3", f"s3://{bucket}/landing/", "lake.orders", fail=True)
    assert orchestrator.run_job(s3_in.pk).succeeded
    FAILS.clear()
    first = orchestrator.run_job(s3.pk)
    assert not first.succeeded and "broke once" in first.error

    batch = first.target_batch_id
    tables_root = f"warehouse/team-{team_id}/lake"
    raw = HiveTable.objects.get(table_name="orders")
    assert raw.location == f"s3a://{bucket}/{tables_root}/orders"
    written = keys(client, bucket, f"{tables_root}/orders/batch_id={batch}/")
    assert any(k.endswith(".parquet") for k in written)
    assert keys(client, bucket, f"{tables_root}/orders_totals/batch_id={batch}/")
    # Written, not published: the job did not end well, its readers see no row of it.
    assert published(spark, raw.location).count() == 0

    # A re-run of the batch (every step again) replaces its partitions' objects.
    s3.steps.update(can_recover=False)
    second = orchestrator.run_job(s3.pk)
    assert second.succeeded, second.error
    assert second.target_batch_id == batch
    # The first attempts, superseded by the re-run's, are removed from the bucket.
    assert partitions.remove_unused()
    rewritten = keys(client, bucket, f"{tables_root}/orders/batch_id={batch}/")
    assert rewritten and not set(rewritten) & {k for k in written if k.endswith(".parquet")}
    assert published(spark, raw.location).count() == 5
    assert {r[0] for r in published(spark, raw.location).select("source_file").collect()} == {
        f"s3a://{bucket}/landing/{name}" for name in ORDERS
    }
    (attempt,) = partitions.published(raw)
    assert attempt.bytes and attempt.bytes > 0, "its size, listed in the bucket"

    assert rows(spark, "orders") == rows(spark, "orders_local")
    totals = rows(spark, "orders_totals")
    assert totals == rows(spark, "orders_local_totals")
    assert totals == [("ann", 4.0, 2), ("bob", 4.5, 2), ("cid", 9.5, 1)]
    # Nothing of the s3 pipeline's landed on local disk.
    assert not (Path(settings.BDRE_WAREHOUSE) / f"team-{team_id}" / "lake" / "orders").exists()
