from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.management.base import BaseCommand, CommandError

from batches import partitions, stores
from batches.models import HiveTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Command(BaseCommand):
    help = (
        "Once after an upgrade to write-audit-publish, with the workers stopped: record the "
        "partitions each table's steps wrote in place (<table>/batch_id=<n>/part-*), their "
        "files moved into the batch's legacy/ folder, published, so that every batch stays "
        "in its readers' view (docs/quality.md, 'Write, audit, publish'). Tables on a store "
        "only Hadoop reaches (HDFS, GCS, ADLS) are moved through a classic Spark session, "
        "the workers' own. Idempotent."
    )

    def handle(self, *args: object, **options: object) -> None:
        total = 0
        spark: SparkSession | None = None
        unreached = []
        for table in HiveTable.objects.exclude(batch_id_partition_col="").order_by("pk"):
            if spark is None and not stores.reached_without_spark(table.location):
                from processes.step_kinds.spark_session import get_spark

                spark = get_spark()
            try:
                adopted = partitions.adopt(table, spark=spark)
            except stores.StoreUnreachable as exc:
                # The other tables are adopted all the same; this one waits for a session
                # that reaches its store.
                self.stderr.write(f"{table}: not adopted: {exc}")
                unreached.append(str(table))
                continue
            total += len(adopted)
            if adopted:
                batches = ", ".join(str(p.batch_id) for p in adopted)
                self.stdout.write(f"{table}: adopted batch {batches}")
        self.stdout.write(f"{total} partition(s) adopted.")
        if unreached:
            raise CommandError(
                f"not adopted, their store out of this session's reach: {', '.join(unreached)}"
            )
