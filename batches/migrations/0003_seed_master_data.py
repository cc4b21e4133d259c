"""Batch states with BDRE's ids, and seed batch 0 (the input of jobs without upstream)."""

from django.db import migrations

BATCH_STATUSES = [
    (0, "NEW", "queued, not yet claimed"),
    (1, "PROCESSED", "consumed successfully"),
    (2, "ACCESSED", "claimed by a running job"),
    (3, "FAILED", "the run that claimed it failed; retried by the next run"),
    (4, "DISCARDED", "dead letter: failed max_retries times, waits for a requeue"),
]


def seed(apps, schema_editor):
    BatchStatus = apps.get_model("batches", "BatchStatus")
    Batch = apps.get_model("batches", "Batch")
    for pk, name, description in BATCH_STATUSES:
        BatchStatus.objects.update_or_create(
            id=pk, defaults={"name": name, "description": description}
        )
    Batch.objects.get_or_create(id=0, defaults={"batch_type": "seed"})


def unseed(apps, schema_editor):
    apps.get_model("batches", "Batch").objects.filter(id=0).delete()
    apps.get_model("batches", "BatchStatus").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("batches", "0002_initial")]
    operations = [migrations.RunPython(seed, unseed)]
