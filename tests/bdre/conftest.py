"""Fixtures of the project's own tests (tests/bdre/)."""

from __future__ import annotations

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections


@pytest.fixture
def connection_kept(db):
    # As Django's test client does: a request must not close the test's connection (with
    # SQLite in memory that would drop the test database).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
