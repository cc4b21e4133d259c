"""The Celery application. Configuration comes from Django settings (``CELERY_*``)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bdre.settings")

app = Celery("bdre")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def ensure_broker_folders() -> None:
    """The filesystem transport fails on missing folders; create them before any use."""
    options = app.conf.broker_transport_options or {}
    keys = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
    for key in (*keys, "unacked_folder", "bad_folder"):
        folder = options.get(key)
        if folder:
            os.makedirs(folder, exist_ok=True)
