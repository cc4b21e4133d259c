"""The Celery app is configured from Django settings and starts without a server."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from bdre.celery import app


def test_celery_reads_the_broker_from_settings():
    assert app.conf.broker_url == settings.CELERY_BROKER_URL
    assert app.conf.beat_scheduler == "django_celery_beat.schedulers:DatabaseScheduler"
    assert app.conf.task_serializer == "json"


def test_filesystem_broker_folders_exist():
    if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        return
    folders = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
    for key in (*folders, "unacked_folder", "bad_folder"):
        assert Path(app.conf.broker_transport_options[key]).is_dir()


def test_a_message_round_trips_through_the_configured_broker():
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue("bdre-test-roundtrip")
        try:
            queue.put({"hello": "bdre"})
            message = queue.get(timeout=10)
            assert message.payload == {"hello": "bdre"}
            message.ack()
        finally:
            queue.close()
