from django.apps import AppConfig


class ProcessesConfig(AppConfig):
    name = "processes"
    verbose_name = "Processes and runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from bdre.metrics import register
        from processes import signals  # noqa: F401  (connects the receivers)
        from processes.metrics import RegistryCollector, connect

        connect()
        register("processes", RegistryCollector())
