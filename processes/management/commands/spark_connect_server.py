"""``manage.py spark_connect_server``: a Spark Connect server with BDRE's session settings, in
the foreground (it execs the JVM). The image's ``spark-connect`` role (bdre/entrypoint.py)
runs it; docs/operations.md, "Spark Connect as the cluster's front". It answers only
clients that send ``SPARK_CONNECT_TOKEN``."""

from __future__ import annotations

import os
import shlex
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bdre import spark_cluster
from processes.step_kinds.spark_session import session_conf


def server_conf(master: str, host: str, port: int) -> dict[str, str]:
    """The server's ``--conf`` settings: what a classic BDRE session on ``master`` is built
    with (BDRE's defaults, ``spark-defaults.conf``, ``SPARK_CONF``, and the SQL sandbox's
    static settings, which no client of the server can change), and the server's binding."""
    return spark_cluster.connect_conf(session_conf(master), host, port)


class Command(BaseCommand):
    help = (
        "Run a Spark Connect server on SPARK_MASTER with BDRE's session settings (the SQL "
        "sandbox's, the warehouse, SPARK_CONF), in the foreground. Point the Spark-queue "
        "workers at it with SPARK_REMOTE=sc://HOST:PORT (docs/operations.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--master", default=None, help="the cluster (default SPARK_MASTER)")
        parser.add_argument("--host", default="0.0.0.0", help="the address to listen on")
        parser.add_argument("--port", type=int, default=15002, help="the port to listen on")
        parser.add_argument(
            "--print", action="store_true", help="print the command line instead of running it"
        )

    def handle(self, *args: Any, **o: Any) -> None:
        master = o["master"] or settings.SPARK_MASTER
        argv = spark_cluster.connect_command(master, server_conf(master, o["host"], o["port"]))
        if o["print"]:
            # The token is not on the command line (bdre.spark_cluster.daemon_env).
            self.stdout.write(shlex.join(argv))
            return
        if not settings.SPARK_CONNECT_TOKEN:
            # A server without a token runs any client's Spark code, with its reach into
            # every team's warehouse.
            raise CommandError(
                "SPARK_CONNECT_TOKEN is not set: the Spark Connect server answers only clients "
                "that send it. Generate one (python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))') and give the same SPARK_CONNECT_TOKEN to "
                "the server and to the Spark-queue workers (docs/operations.md)"
            )
        self.stdout.write(f"Spark Connect server on {master}, listening on {o['host']}:{o['port']}")
        self.stdout.flush()
        env = spark_cluster.daemon_env(connect_token=settings.SPARK_CONNECT_TOKEN)
        os.execvpe(argv[0], argv, env)
