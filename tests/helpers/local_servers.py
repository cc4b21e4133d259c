"""A server on 127.0.0.1 in a thread of the test, for the tests that talk to one (webhook
receivers, OpenLineage collectors, a raw TCP peer, a port already taken)."""

from __future__ import annotations

import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer


@contextmanager
def served(
    handler: type[socketserver.BaseRequestHandler],
    *,
    http: bool = True,
    tls: ssl.SSLContext | None = None,
) -> Iterator[socketserver.TCPServer]:
    """``handler`` served on a port the system picks (over TLS with a server context
    ``tls``), until the block ends."""
    kind = ThreadingHTTPServer if http else socketserver.ThreadingTCPServer
    server = kind(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    # The loop looks for shutdown() this often: at the default 0.5 s every test using a
    # server waited that long at its end.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
