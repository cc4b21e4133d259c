"""Which store a table's folder is on, and who can reach it (batches/stores.py): a store only
Hadoop reaches is reached through a classic Spark session's JVM, which a Spark Connect client
has not; tests/processes/step_kinds/test_publish.py writes tables on one."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from batches import stores


def test_a_spark_connect_client_cannot_reach_a_store_only_hadoop_reaches():
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    connect = ConnectSession.__new__(ConnectSession)
    with pytest.raises(stores.StoreUnreachable, match="classic session"):
        stores.of("hdfs://namenode/tables/t", connect)
    with pytest.raises(stores.StoreUnreachable, match="worker of the Spark queue"):
        stores.of("gs://bucket/tables/t")
    assert isinstance(stores.of("s3://bucket/t"), stores.S3Store)
    assert isinstance(stores.of("file:///lake/t"), stores.LocalStore)


def test_the_system_check_warns_of_tables_connect_workers_cannot_reach(settings, capsys):
    settings.SPARK_REMOTE = "sc://spark:15002"
    settings.BDRE_TABLE_STORE = "abfs://lake@account.dfs.core.windows.net/tables"
    call_command("check")
    assert "batches.W001" in capsys.readouterr().err
    settings.BDRE_TABLE_STORE = "s3://lake/tables"
    call_command("check")
    assert "batches.W001" not in capsys.readouterr().err
