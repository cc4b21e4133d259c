"""Django system checks of the batches app (``manage.py check``, run by every command)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register

from batches import stores
from batches.locations import table_store


@register()
def table_store_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Tables on a store only Hadoop reaches need classic Spark sessions on the Spark queue:
    a Connect client cannot list nor remove their attempts (batches.stores)."""
    store = table_store()
    if not store or not settings.SPARK_REMOTE or stores.reached_without_spark(store):
        return []
    return [
        Warning(
            f"BDRE_TABLE_STORE={settings.BDRE_TABLE_STORE} is a store only Hadoop reaches, and "
            "SPARK_REMOTE makes the workers' sessions Spark Connect clients, which have no "
            "JVM to reach it",
            hint="Run the Spark queues' workers with classic sessions (SPARK_MASTER, no "
            "SPARK_REMOTE), or keep the tables on S3 or a local warehouse: steps writing "
            "there fail until then (docs/quality.md, 'Where the tables are').",
            id="batches.W001",
        )
    ]
