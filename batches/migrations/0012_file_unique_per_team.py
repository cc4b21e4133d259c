# Separate from 0011: PostgreSQL refuses to change a table's indexes in the transaction that
# updated its rows ("pending trigger events").
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("batches", "0011_file_team"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="file",
            name="file_unique_server_path_hash",
        ),
        migrations.RemoveConstraint(
            model_name="file",
            name="file_unique_local_path_hash",
        ),
        migrations.AddConstraint(
            model_name="file",
            constraint=models.UniqueConstraint(
                fields=("team", "server", "path", "file_hash"),
                name="file_unique_team_server_path_hash",
            ),
        ),
        migrations.AddConstraint(
            model_name="file",
            constraint=models.UniqueConstraint(
                condition=models.Q(("server__isnull", True)),
                fields=("team", "path", "file_hash"),
                name="file_unique_team_local_path_hash",
            ),
        ),
    ]
