"""Indirect column dependencies (filters, join conditions, group-bys) as relations."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("lineage", "0007_step_kind_query_types")]
    operations = [
        migrations.AddField(
            model_name="lineagerelation",
            name="indirect",
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
