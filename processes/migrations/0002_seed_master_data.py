"""Master tables with BDRE's ids."""

from django.db import migrations

EXEC_STATUSES = [
    (1, "NOT_RUNNING", "not running"),
    (2, "RUNNING", "running"),
    (3, "SUCCESS", "finished successfully"),
    (4, "PAUSED", "paused"),
    (5, "SUSPENDED", "suspended"),
    (6, "FAILED", "failed"),
    (7, "KILLED", "killed"),
    (8, "STARTED", "started"),
]

WORKFLOW_TYPES = [
    (0, "steps", "steps only: run by a parent's workflow"),
    (1, "stand-alone", "run by itself, outside any workflow engine"),
    (2, "celery", "run by Celery workers (replaces Oozie)"),
]

# (id, name, parent type id, job kind, description). Parent types are jobs; step types name
# the registered job kind that runs them.
PROCESS_TYPES = [
    (1, "ingestion-job", None, "", "watches a storage location and registers new files"),
    (2, "load-job", None, "", "loads raw files into tables"),
    (3, "semantic-job", None, "", "derives tables with SQL"),
    (4, "export-job", None, "", "exports tables to files or databases"),
    (5, "generic-job", None, "", "any mix of steps"),
    (11, "file-scan", 1, "ingest.scan", "marker listing of new files into batches"),
    (21, "spark-load", 2, "spark.load", "raw files into a Parquet table"),
    (22, "spark-cleanse", 2, "spark.cleanse", "valid rows to a clean table, invalid with reason"),
    (23, "spark-shred", 2, "spark.shred", "enriched events into atomic events and contexts"),
    (31, "spark-sql", 3, "spark.sql", "a Spark SQL statement into a table"),
    (41, "spark-export", 4, "spark.export", "a table to files or a JDBC table"),
    (51, "python-callable", 5, "python.callable", "a dotted path to a Python function"),
    (52, "generic-scan", 5, "ingest.scan", "file scan inside a generic job"),
    (53, "generic-load", 5, "spark.load", "raw load inside a generic job"),
    (54, "generic-cleanse", 5, "spark.cleanse", "cleanse inside a generic job"),
    (55, "generic-shred", 5, "spark.shred", "shred inside a generic job"),
    (56, "generic-sql", 5, "spark.sql", "Spark SQL inside a generic job"),
    (57, "generic-export", 5, "spark.export", "export inside a generic job"),
]


def seed(apps, schema_editor):
    ExecStatus = apps.get_model("processes", "ExecStatus")
    WorkflowType = apps.get_model("processes", "WorkflowType")
    ProcessType = apps.get_model("processes", "ProcessType")
    for pk, name, description in EXEC_STATUSES:
        ExecStatus.objects.update_or_create(
            id=pk, defaults={"name": name, "description": description}
        )
    for pk, name, description in WORKFLOW_TYPES:
        WorkflowType.objects.update_or_create(
            id=pk, defaults={"name": name, "description": description}
        )
    for pk, name, parent, kind, description in PROCESS_TYPES:
        ProcessType.objects.update_or_create(
            id=pk,
            defaults={
                "name": name,
                "parent_process_type_id": parent,
                "job_kind": kind,
                "description": description,
            },
        )


def unseed(apps, schema_editor):
    apps.get_model("processes", "ProcessType").objects.filter(
        parent_process_type__isnull=False
    ).delete()
    apps.get_model("processes", "ProcessType").objects.all().delete()
    apps.get_model("processes", "WorkflowType").objects.all().delete()
    apps.get_model("processes", "ExecStatus").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("processes", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
