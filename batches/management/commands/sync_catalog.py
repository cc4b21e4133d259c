from __future__ import annotations

import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from batches import catalog


class Command(BaseCommand):
    help = (
        "Publish BDRE's tables in the Hive metastore (docs/operations.md, 'The catalog'): "
        "start a Spark session of its own on the metastore, make the catalog hold exactly "
        "the registered tables and their batch_id partitions, and exit. With --print-conf, "
        "print the SparkSession lines a user's notebook needs instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--print-conf",
            action="store_true",
            help="print the SparkSession builder lines of a session on the catalog, and exit",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        if o["print_conf"]:
            self.stdout.write(catalog.notebook_snippet(), ending="")
            return
        started = time.monotonic()
        mark = catalog.mark()  # before the sync: what changes during it is synced next time
        try:
            spark = catalog.catalog_session()
        except ImproperlyConfigured as exc:
            message = f"the catalog sync cannot start: {exc}"
            catalog.record_failure(message)
            raise CommandError(message) from exc
        try:
            summary = catalog.sync_all(spark)
        except Exception as exc:
            message = f"the catalog sync failed: {exc}\n{catalog.failure_hint()}"
            catalog.record_failure(message)
            raise CommandError(message) from exc
        finally:
            # An embedded Derby metastore admits one JVM: never keep it open.
            spark.stop()
        catalog.record_sync(mark, summary)
        for line in summary.lines():
            self.stdout.write(f"  {line}")
        self.stdout.write(
            f"catalog synced in {time.monotonic() - started:.1f} s: {len(summary.created)} "
            f"created, {len(summary.replaced)} replaced, {len(summary.unchanged)} unchanged, "
            f"{len(summary.dropped)} dropped, {len(summary.skipped)} skipped"
        )
