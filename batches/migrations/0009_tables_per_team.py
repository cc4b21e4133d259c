"""Tables belong to a team (docs/security.md): each registered table gets the team of its
application (0010 then makes the team required and a name unique per team). Locations are
left as they are, so nothing moves: a later write of an existing registration keeps writing
its recorded location.

Two migrations, two transactions: on PostgreSQL, altering a table whose rows this
transaction updated (with deferred foreign key checks pending) is refused."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def owner_from_application(apps, schema_editor):
    HiveTable = apps.get_model("batches", "HiveTable")
    BusDomain = apps.get_model("processes", "BusDomain")
    team = BusDomain.objects.filter(pk=OuterRef("bus_domain_id")).values("team_id")[:1]
    HiveTable.objects.update(team_id=Subquery(team))


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("batches", "0008_manifest_run_index"),
        ("processes", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="hivetable",
            name="team",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tables",
                to="auth.group",
            ),
        ),
        migrations.RunPython(owner_from_application, migrations.RunPython.noop),
    ]
