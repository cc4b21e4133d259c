"""A real SMTP server and real HTTP receivers on 127.0.0.1 for the alerts' tests, a network
that ends at 127.0.0.1, and alerts sent as a worker would send them (the task run at once,
after the commit)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from tests.helpers.alerts import NAMES, Receiver, serving


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


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A service of the installation's own network (an HTTP server on 127.0.0.1) that no
    admin listed: what an attacker points a webhook at."""
    with serving(Receiver(url="")) as running:
        yield running


@pytest.fixture
def webhook(settings) -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1, listed in ``BDRE_ALERT_ALLOWED_HOSTS`` as an admin
    lists an internal chat server."""
    settings.BDRE_ALERT_ALLOWED_HOSTS = ["127.0.0.1"]
    with serving(Receiver(url="")) as running:
        yield running


@dataclass
class Network:
    """Every address a test's webhook connected to (or tried to)."""

    connected: list[str] = field(default_factory=list)


@pytest.fixture(autouse=True)
def network(monkeypatch) -> Network:
    """No alerts test leaves 127.0.0.1: host names resolve from ``NAMES`` (through the
    resolver ``alerts.outbound`` uses; no DNS query is sent), and a connection to any
    other address is refused before it is made, and recorded."""
    from alerts import outbound

    seen = Network()

    def resolve(host: str, port: int) -> list[outbound.IPAddress]:
        if host not in NAMES:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(address) for address in NAMES[host]]

    real = socket.create_connection

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        host, port = address[0], address[1]
        try:
            ips = [ipaddress.ip_address(host)]
        except ValueError:
            try:  # 2130706433, 0x7f.1: what the C library reads as an address
                ips = [ipaddress.IPv4Address(socket.inet_aton(host))]
            except OSError:  # a name: resolved as the code under test would have it
                ips = outbound.resolve(host, port)
        ip = ips[0]
        seen.connected.append(str(ip))
        if not ip.is_loopback:
            raise ConnectionRefusedError(f"the tests connect to 127.0.0.1 only, not to {ip}")
        return real((str(ip), port), *args, **kwargs)

    monkeypatch.setattr(outbound, "resolve", resolve)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    return seen
