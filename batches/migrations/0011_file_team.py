import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def files_take_their_batchs_team(apps, schema_editor):
    File = apps.get_model("batches", "File")
    Batch = apps.get_model("batches", "Batch")
    File.objects.update(
        team_id=Subquery(
            Batch.objects.filter(pk=OuterRef("batch_id")).values("bus_domain__team_id")[:1]
        )
    )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("batches", "0010_table_team_required_and_shares"),
        ("processes", "0010_names_per_team"),
    ]

    operations = [
        migrations.AddField(
            model_name="file",
            name="team",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="auth.group",
            ),
        ),
        migrations.RunPython(files_take_their_batchs_team, migrations.RunPython.noop),
    ]
