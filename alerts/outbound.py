"""Outbound requests (alert webhooks) go only where the installation allows: the one place
that decides whether a URL may be called, and the one client that calls it.

A webhook URL is given by a team's developer (``alerts.webhook``) or admin (team
destinations), but the request leaves from the worker, inside the installation's network. So
the host is resolved and every address it has must be public (``ipaddress``: global, and not
loopback, private, link-local, multicast, reserved or unspecified, also inside an IPv4-mapped,
6to4, Teredo or NAT64 IPv6 address), or listed by the installation's admin in
``BDRE_ALERT_ALLOWED_HOSTS``. The request then goes to an address that was checked, never to
the name again, so that a DNS answer that changes after the check (rebinding) reaches nothing
else; https still verifies the certificate against the name, and sends it (SNI, Host).
``docs/security.md``, "Outbound requests".
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# The well-known NAT64 prefix (RFC 6052): its last 32 bits are the IPv4 address a translator
# connects to; ipaddress calls the whole prefix global.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# A host whose last label is a number is an IPv4 address in one of the forms the C library
# reads (2130706433, 0x7f000001, 0177.0.0.1, 127.1), as browsers and curl read it too.
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_HOST_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")


class Refused(ValueError):
    """A URL this installation does not call; the message says what to fix."""


@dataclass(frozen=True)
class Checked:
    """A URL that may be called, with the addresses it may be called at (all checked)."""

    scheme: str
    host: str  # as the URL names it: sent in Host, SNI and checked against the certificate
    port: int
    target: str  # the path and query
    addresses: tuple[IPAddress, ...]


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses of a host name (the system's resolver; the tests replace it)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]


def _embedded(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to (mapped, 6to4, Teredo, NAT64)."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        found += list(address.teredo)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def is_public(address: IPAddress) -> bool:
    """Whether an address is on the public internet, and so outside the installation's own
    network. Each property is asked for itself: ``is_global`` alone lets multicast through."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return is_public(address.ipv4_mapped)  # the IPv4 address itself, on an IPv6 socket
    if not all(is_public(inner) for inner in _embedded(address)):
        return False
    return (
        address.is_global
        and not address.is_private
        and not address.is_loopback
        and not address.is_link_local
        and not address.is_multicast
        and not address.is_reserved
        and not address.is_unspecified
        and not (isinstance(address, ipaddress.IPv6Address) and address.is_site_local)
    )


def _literal(host: str) -> IPAddress | None:
    """The address a host names itself, in any form, or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError as exc:
            raise Refused(f"{host} is not an IP address") from exc
    return None


def _normal(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _allowed(entries: Iterable[str]) -> tuple[set[str], set[IPAddress]]:
    """``BDRE_ALERT_ALLOWED_HOSTS``: the names the admin listed, and the addresses."""
    names: set[str] = set()
    addresses: set[IPAddress] = set()
    for entry in entries:
        host = _normal(entry)
        try:
            addresses.add(ipaddress.ip_address(host))
        except ValueError:
            names.add(host)
    return names, addresses


def _listed(address: IPAddress, listed: set[IPAddress]) -> bool:
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return address in listed or (mapped is not None and mapped in listed)


def check(url: str) -> Checked:
    """The URL, if this installation may call it: http or https, no user or password, and a
    host whose every address is public, unless the admin listed the host or the address
    (``BDRE_ALERT_ALLOWED_HOSTS``). ``Refused`` otherwise, saying what to fix."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise Refused(f"{url!r} is not an http:// or https:// URL with a host") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"{url!r} is not an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise Refused("put no user or password in the URL")
    host = _normal(parts.hostname)
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise Refused(f"{parts.hostname!r} is not a host name") from exc
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    names, listed = _allowed(settings.BDRE_ALERT_ALLOWED_HOSTS)
    fix = (
        "use a public host, or ask your installation's admin to list it in "
        'BDRE_ALERT_ALLOWED_HOSTS (docs/security.md, "Outbound requests")'
    )
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    elif not _HOST_NAME.match(host):
        raise Refused(f"{parts.hostname!r} is not a host name")
    else:
        try:
            addresses = resolve(host, port)
        except (OSError, UnicodeError):
            addresses = []
        # A name that does not resolve is said like one that resolves inside: either answer
        # alone would tell which internal names exist.
        if not addresses:
            raise Refused(f"{host} does not resolve to public addresses only; {fix}")
    if host not in names:
        for address in addresses:
            if not is_public(address) and not _listed(address, listed):
                if literal is not None:
                    raise Refused(f"{host} is not a public address; {fix}")
                raise Refused(f"{host} does not resolve to public addresses only; {fix}")
    return Checked(parts.scheme, host, port, target, tuple(dict.fromkeys(addresses)))


def tls_context() -> ssl.SSLContext:
    """The certificates an https webhook is verified with (the system's; the tests add
    theirs)."""
    return ssl.create_default_context()


def _pinned(addresses: tuple[IPAddress, ...]) -> Callable[..., socket.socket]:
    """``http.client``'s connection factory, at the checked addresses instead of the name."""

    def connect(
        address: tuple[str, int], timeout: float | None = None, source: object = None
    ) -> socket.socket:
        error: OSError = OSError("no address")
        for ip in addresses:
            try:
                return socket.create_connection((str(ip), address[1]), timeout)
            except OSError as exc:
                error = exc
        raise error

    return connect


def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST ``body`` to the URL, checked now (DNS answers change), at the address checked;
    the answer's status. Redirects are not followed (they would lead past the check).
    Raises ``Refused``, or what the connection raised (``OSError``, ``ssl.SSLError``,
    ``http.client.HTTPException``: a service that does not speak HTTP)."""
    checked = check(url)
    connection: http.client.HTTPConnection
    if checked.scheme == "https":
        # The name, not the address, is what the certificate must be for.
        connection = http.client.HTTPSConnection(
            checked.host, checked.port, timeout=timeout, context=tls_context()
        )
    else:
        connection = http.client.HTTPConnection(checked.host, checked.port, timeout=timeout)
    connection._create_connection = _pinned(checked.addresses)  # type: ignore[attr-defined]
    try:
        connection.request("POST", checked.target, body=body, headers=headers)
        answer = connection.getresponse()
        answer.read(1024)
        return answer.status
    finally:
        connection.close()
