"""Alerts as the alerts' tests send and receive them: a job's alert properties, a run that
fails, HTTP receivers on 127.0.0.1 and the names the tests' resolver knows
(tests/alerts/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from processes import lifecycle, registry
from processes.models import Process
from tests.helpers.local_servers import served


def alerting(job: Process, **values: str) -> Process:
    """Give ``job`` its ``alerts.*`` properties through the registry."""
    registry.set_properties(job, {"alerts": values})
    return job


def fail_once(job: Process, error: str, capture) -> int:
    """One failed run of ``job``, its alerts sent after the commit as a worker sends them."""
    with capture(execute=True):
        run = lifecycle.init_job(job.pk).instance_exec_id
    with capture(execute=True):
        lifecycle.term_job(job.pk, error)
    return run


@dataclass
class Receiver:
    url: str
    port: int = 0
    posts: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    status: int = 200
    location: str = ""


@contextmanager
def serving(receiver: Receiver) -> Iterator[Receiver]:
    """An HTTP server on 127.0.0.1 that records every JSON body posted to it and answers
    ``receiver.status`` (with ``receiver.location``, if set)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            receiver.posts.append(json.loads(self.rfile.read(length)))
            receiver.headers.append(dict(self.headers))
            self.send_response(receiver.status)
            if receiver.location:
                self.send_header("Location", receiver.location)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    with served(Handler) as server:
        receiver.port = server.server_address[1]
        receiver.url = f"http://127.0.0.1:{receiver.port}/hooks/bdre"
        yield receiver


# The names the tests' resolver knows, with their addresses; any other name does not resolve.
# The public ones are never connected to (``network``).
NAMES: dict[str, list[str]] = {
    "hooks.example.com": ["93.184.215.14"],
    "hooks.slack.com": ["54.230.0.1", "2600:9000:2000::1"],
    "localhost": ["127.0.0.1", "::1"],
}
