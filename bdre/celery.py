"""The Celery application. Configuration comes from Django settings (``CELERY_*``)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init, worker_process_shutdown, worker_shutdown

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


# The workers' metrics files (bdre/metrics.py): imported when called, so that prometheus-client
# is first imported after the settings put its folder in the environment.
@worker_init.connect(dispatch_uid="bdre-metrics-worker-init")
def _clear_dead_metrics(**kwargs: object) -> None:
    from bdre.metrics import clear_dead_processes

    clear_dead_processes()


@worker_process_shutdown.connect(dispatch_uid="bdre-metrics-process-shutdown")
def _pool_process_ended(pid: int | None = None, **kwargs: object) -> None:
    from bdre.metrics import process_ended

    process_ended(pid or os.getpid())


@worker_shutdown.connect(dispatch_uid="bdre-metrics-worker-shutdown")
def _worker_ended(**kwargs: object) -> None:
    from bdre.metrics import process_ended

    process_ended(os.getpid())
