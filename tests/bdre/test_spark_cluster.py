"""bdre/spark_cluster.py's daemons when the ports they are given are not free: another web
server on the master's UI port, as on a user's machine where 8080 is taken."""

from __future__ import annotations

import http.server

import pytest

from bdre import spark_cluster
from tests.helpers.local_servers import served

pytestmark = pytest.mark.cluster


class _Html(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!DOCTYPE html><html><body>another web server</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def taken_port():
    with served(_Html) as server:
        yield server.server_address[1]


def test_a_master_ui_port_taken_by_another_server_moves_and_the_cluster_still_starts(
    tmp_path, taken_port
):
    cluster = spark_cluster.start(tmp_path, cores=1, memory="512m", ui_port=taken_port)
    try:
        assert cluster.ui_port != taken_port
        assert cluster.alive_workers() == 1
        assert cluster.state()["url"] == cluster.master_url
    finally:
        cluster.stop()


def test_a_connect_server_on_port_zero_reports_the_port_it_bound(tmp_path):
    server = spark_cluster.start_connect(tmp_path, master="local[1]", port=0)
    try:
        assert server.port > 0
        assert spark_cluster._listening("127.0.0.1", server.port)
    finally:
        server.stop()
