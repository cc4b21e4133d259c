"""Whether runs are told to OpenLineage, and when: each run's START and its end (COMPLETE,
FAIL, ABORT) after the lifecycle's transaction commits. The events themselves are built and
sent by :mod:`lineage.openlineage`, imported only when one is sent: importing the client (and
the HTTP libraries under it) took a quarter of every Django process's start (0.35 of 1.4
CPU-s on the 2-core machine), the web server's, each worker's and each ``manage.py``
command's, and OpenLineage is off unless the settings or the client's own variables name a
destination."""

from __future__ import annotations

import os

from django.conf import settings
from django.db import transaction

from processes.models import ExecState

EVENT_OF_STATE = {
    ExecState.SUCCESS: "COMPLETE",
    ExecState.FAILED: "FAIL",
    ExecState.KILLED: "ABORT",
}


def transports() -> list[str]:
    """The transports BDRE's settings name: ``OPENLINEAGE_TRANSPORT``, or else those that
    ``OPENLINEAGE_URL`` and ``OPENLINEAGE_FILE`` imply."""
    if settings.OPENLINEAGE_TRANSPORT:
        return list(settings.OPENLINEAGE_TRANSPORT)
    implied = (("http", settings.OPENLINEAGE_URL), ("file", settings.OPENLINEAGE_FILE))
    return [kind for kind, destination in implied if destination]


def client_configured() -> bool:
    """Whether the environment configures the client itself, by its own variables: a YAML
    file (``OPENLINEAGE_CONFIG``) or ``OPENLINEAGE__TRANSPORT__*`` (Kafka, Datadog, ...)."""
    return bool(os.environ.get("OPENLINEAGE_CONFIG")) or any(
        name.startswith("OPENLINEAGE__TRANSPORT__") for name in os.environ
    )


def enabled() -> bool:
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":  # the client's
        return False
    return bool(transports()) or client_configured()


def announce(run_id: int, event_type: str, error: str = "") -> None:
    """Send the run's event once the current transaction commits (now, outside of one)."""
    if enabled():
        transaction.on_commit(lambda: _send(run_id, event_type, error))


def announce_end(run_id: int, state: ExecState, error: str = "") -> None:
    announce(run_id, EVENT_OF_STATE.get(state, "FAIL"), error)


def _send(run_id: int, event_type: str, error: str) -> None:
    from lineage import openlineage

    openlineage.send(run_id, event_type, error)
