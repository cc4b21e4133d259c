from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.contrib.admin.apps import AdminConfig


class BdreConfig(AppConfig):
    name = "bdre"
    verbose_name = "Teams and access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from bdre import security  # noqa: F401  (connects the failed log-in receiver)
        from bdre.celery import ensure_broker_folders
        from bdre.fields import fernet

        # Fail at start-up, not at the first secret read, on a malformed key.
        fernet()
        ensure_broker_folders()
        # Whitenoise warns on every request while the static root is missing.
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)


class BdreAdminConfig(AdminConfig):
    """Django's admin with a site for superusers only (bdre/admin_site.py)."""

    default_site = "bdre.admin_site.SuperuserAdminSite"
