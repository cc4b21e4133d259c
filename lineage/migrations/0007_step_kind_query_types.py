"""Query types for the column mappings of the step kinds that run no SQL (lineage.steps)."""

from django.db import migrations

QUERY_TYPES = [
    (4, "spark_load", "the column mapping of a spark.load step"),
    (5, "spark_cleanse", "the column mapping of a spark.cleanse step"),
    (6, "spark_shred", "the column mapping of a spark.shred step"),
    (7, "spark_export", "the column mapping of a spark.export step"),
]


def seed(apps, schema_editor):
    Model = apps.get_model("lineage", "LineageQueryType")
    for pk, name, description in QUERY_TYPES:
        Model.objects.update_or_create(id=pk, defaults={"name": name, "description": description})


def unseed(apps, schema_editor):
    apps.get_model("lineage", "LineageQueryType").objects.filter(
        id__in=[pk for pk, _, _ in QUERY_TYPES]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("lineage", "0006_node_unique_per_team")]
    operations = [migrations.RunPython(seed, unseed)]
