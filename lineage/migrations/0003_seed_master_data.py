"""Lineage node and query types with BDRE's ids."""

from django.db import migrations

NODE_TYPES = [
    (1, "table", ""),
    (2, "column", ""),
    (3, "function", ""),
    (4, "temp_table", "a CTE, subquery or temporary view"),
    (5, "idle_column", "a column read but not carried to the output"),
    (6, "constant", "a literal value"),
]
QUERY_TYPES = [(1, "hive", ""), (2, "pig", ""), (3, "spark_sql", "")]


def seed(apps, schema_editor):
    for model, rows in (("LineageNodeType", NODE_TYPES), ("LineageQueryType", QUERY_TYPES)):
        Model = apps.get_model("lineage", model)
        for pk, name, description in rows:
            Model.objects.update_or_create(
                id=pk, defaults={"name": name, "description": description}
            )


def unseed(apps, schema_editor):
    apps.get_model("lineage", "LineageNodeType").objects.all().delete()
    apps.get_model("lineage", "LineageQueryType").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("lineage", "0002_initial")]
    operations = [migrations.RunPython(seed, unseed)]
