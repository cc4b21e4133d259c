"""Names are per team (docs/security.md, "Names are per team"): an application's name is
unique in its team, a live process's in its application in the database and in its team in
the registry (a constraint cannot span the join to the team). Every existing row was unique
across the installation, so every row satisfies the new constraints; going back fails once
two teams share a name."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("processes", "0009_server_roots"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="busdomain",
            options={"ordering": ["name", "id"], "verbose_name": "application"},
        ),
        migrations.AlterField(
            model_name="busdomain",
            name="name",
            field=models.CharField(max_length=128),
        ),
        migrations.AddConstraint(
            model_name="busdomain",
            constraint=models.UniqueConstraint(
                fields=("team", "name"), name="application_unique_name_in_team"
            ),
        ),
        migrations.RemoveConstraint(
            model_name="process",
            name="process_unique_live_name",
        ),
        migrations.AddConstraint(
            model_name="process",
            constraint=models.UniqueConstraint(
                condition=models.Q(("deleted", False)),
                fields=("bus_domain", "name"),
                name="process_unique_live_name_in_application",
            ),
        ),
    ]
