from django.apps import AppConfig


class LineageConfig(AppConfig):
    name = "lineage"
    verbose_name = "Lineage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from lineage import receivers  # noqa: F401  (connects the receivers)
