from django.apps import AppConfig


class LineageConfig(AppConfig):
    name = "lineage"
    verbose_name = "Lineage"
    default_auto_field = "django.db.models.BigAutoField"
