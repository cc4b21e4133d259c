from django.apps import AppConfig


class BatchesConfig(AppConfig):
    name = "batches"
    verbose_name = "Batches, queue and files"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from batches import checks  # noqa: F401 - registers the app's system checks
        from batches.metrics import QueueCollector
        from bdre import metrics

        metrics.register("batches", QueueCollector())
