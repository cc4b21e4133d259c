"""A table node's name is unique per team (and among the nodes of no team)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("lineage", "0005_split_nodes_per_team")]

    operations = [
        migrations.AddConstraint(
            model_name="lineagenode",
            constraint=models.UniqueConstraint(
                condition=models.Q(("container_node__isnull", True)),
                fields=("team", "qualified_name"),
                name="lineage_node_unique_top_level_per_team",
            ),
        ),
        migrations.AddConstraint(
            model_name="lineagenode",
            constraint=models.UniqueConstraint(
                condition=models.Q(("container_node__isnull", True), ("team__isnull", True)),
                fields=("qualified_name",),
                name="lineage_node_unique_top_level_no_team",
            ),
        ),
    ]
