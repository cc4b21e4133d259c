from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from alerts import checks, receivers  # noqa: F401  (connects the receivers)
        from processes.registry.properties import GROUP_CHECKS

        # The registry refuses a bad alerts.* property when a job is registered or changed.
        GROUP_CHECKS[checks.GROUP] = checks.check_job_properties
