"""A real SMTP server and a real HTTP receiver on 127.0.0.1 for the alerts' tests, and
alerts sent as a worker would send them (the task run at once, after the commit)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from processes import registry
from processes.models import Process


class _PortZeroController(Controller):
    """aiosmtpd's controller on a port the system picks (no race for a free port)."""

    def _trigger_server(self) -> None:
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


@dataclass
class Mailbox:
    port: int
    messages: list[Message] = field(default_factory=list)
    recipients: list[list[str]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.original_content))
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"


@pytest.fixture
def smtp(settings) -> Iterator[Mailbox]:
    """An SMTP server on 127.0.0.1; Django's SMTP backend sends to it."""
    box = Mailbox(port=0)
    controller = _PortZeroController(box, hostname="127.0.0.1", port=0)
    controller.start()
    box.port = controller.port
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = controller.port
    settings.EMAIL_TIMEOUT = 5
    yield box
    controller.stop()


@dataclass
class Receiver:
    url: str
    posts: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    status: int = 200


@pytest.fixture
def webhook() -> Iterator[Receiver]:
    """An HTTP server on 127.0.0.1 that records every JSON body posted to it and answers
    ``receiver.status``."""
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            receiver.posts.append(json.loads(self.rfile.read(length)))
            receiver.headers.append(dict(self.headers))
            self.send_response(receiver.status)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/bdre"
    yield receiver
    server.shutdown()
    server.server_close()


@pytest.fixture
def eager() -> Iterator[None]:
    """Tasks run in the caller, as a worker would run them (Celery's eager mode)."""
    from bdre.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


def alerting(job: Process, **values: str) -> Process:
    """Give ``job`` its ``alerts.*`` properties through the registry."""
    registry.set_properties(job, {"alerts": values})
    return job
