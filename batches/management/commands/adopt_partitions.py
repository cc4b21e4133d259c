from __future__ import annotations

from django.core.management.base import BaseCommand

from batches import partitions
from batches.models import HiveTable


class Command(BaseCommand):
    help = (
        "Once after an upgrade to write-audit-publish, with the workers stopped: record the "
        "partitions each table's steps wrote in place (<table>/batch_id=<n>/part-*), their "
        "files moved into the batch's legacy/ folder, published, so that every batch stays "
        "in its readers' view (docs/quality.md, 'Write, audit, publish'). Idempotent."
    )

    def handle(self, *args: object, **options: object) -> None:
        total = 0
        for table in HiveTable.objects.exclude(batch_id_partition_col="").order_by("pk"):
            adopted = partitions.adopt(table)
            total += len(adopted)
            if adopted:
                batches = ", ".join(str(p.batch_id) for p in adopted)
                self.stdout.write(f"{table}: adopted batch {batches}")
        self.stdout.write(f"{total} partition(s) adopted.")
