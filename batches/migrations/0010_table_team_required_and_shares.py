"""Tables belong to a team: the team is required, a name is unique per team, and a table is
shared with another team read-only through ``TableShare`` (docs/security.md)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("batches", "0009_tables_per_team"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="hivetable",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tables",
                to="auth.group",
            ),
        ),
        migrations.RemoveConstraint(model_name="hivetable", name="table_unique_name"),
        migrations.AddConstraint(
            model_name="hivetable",
            constraint=models.UniqueConstraint(
                fields=("team", "dbname", "table_name"), name="table_unique_name_per_team"
            ),
        ),
        migrations.CreateModel(
            name="TableShare",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("created_ts", models.DateTimeField(auto_now_add=True)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "table",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="shares",
                        to="batches.hivetable",
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="shared_tables",
                        to="auth.group",
                    ),
                ),
            ],
            options={
                "verbose_name": "table share",
                "ordering": ["table_id", "team_id"],
                "constraints": [
                    models.UniqueConstraint(fields=("table", "team"), name="table_share_once")
                ],
            },
        ),
    ]
