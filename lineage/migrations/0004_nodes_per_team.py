"""Lineage nodes belong to a team (docs/security.md, "Lineage shows only what the user may
see"): two teams' ``sales.orders`` become two nodes. 0005 gives the existing nodes their team
(splitting a node several teams' queries touched), 0006 makes a table node's name unique per
team.

Three migrations, three transactions: on PostgreSQL, altering a table whose rows this
transaction updated (with deferred foreign key checks pending) is refused."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("lineage", "0003_seed_master_data"),
    ]

    operations = [
        migrations.AddField(
            model_name="lineagenode",
            name="team",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="lineage_nodes",
                to="auth.group",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="lineagenode",
            name="lineage_node_unique_top_level",
        ),
    ]
