from __future__ import annotations

import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bdre import spark_cluster
from processes.step_kinds.spark_session import session_conf


class Command(BaseCommand):
    help = (
        "Run a standalone Spark master and worker on this machine (from the PySpark wheel), "
        "and with --connect a Spark Connect server on it, until Ctrl-C. Point BDRE at them "
        "with SPARK_MASTER or SPARK_REMOTE (docs/operations.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=7077, help="the master's port")
        parser.add_argument("--ui-port", type=int, default=8080, help="the master's web UI")
        parser.add_argument("--cores", type=int, default=2, help="the worker's cores")
        parser.add_argument("--memory", default="2g", help="the worker's memory for executors")
        parser.add_argument(
            "--connect",
            type=int,
            nargs="?",
            const=15002,
            default=None,
            metavar="PORT",
            help="also start a Spark Connect server on the cluster (port 15002 by default)",
        )
        parser.add_argument("--work-dir", type=Path, default=settings.VAR_DIR / "spark-cluster")

    def handle(self, *args: Any, **o: Any) -> None:
        work: Path = o["work_dir"].resolve()
        try:
            cluster = spark_cluster.start(
                work, cores=o["cores"], memory=o["memory"], port=o["port"], ui_port=o["ui_port"]
            )
        except spark_cluster.ClusterError as exc:
            raise CommandError(f"The Spark cluster did not start: {exc}") from exc
        servers: list[spark_cluster.Cluster | spark_cluster.ConnectServer] = [cluster]
        try:
            self.stdout.write(
                f"Spark master {cluster.master_url} (UI {cluster.ui_url}), one worker with "
                f"{o['cores']} cores and {o['memory']}; logs in {work}."
            )
            if o["connect"] is not None:
                # The installation's token, else one for this run, printed for the workers.
                token = settings.SPARK_CONNECT_TOKEN or spark_cluster.new_token()
                connect = spark_cluster.start_connect(
                    work / "connect",
                    master=cluster.master_url,
                    port=o["connect"],
                    # A BDRE session's settings (the sandbox's, which no client can change;
                    # one core, so that a Spark-queue worker with SPARK_MASTER can run beside).
                    conf={**session_conf(cluster.master_url), "spark.driver.host": "127.0.0.1"},
                    token=token,
                )
                servers.append(connect)
                remote = f"sc://{connect.host}:{connect.port}"
                self.stdout.write(
                    f"Spark Connect server {remote} on the cluster; it answers only clients "
                    "that send its token (SPARK_CONNECT_TOKEN)."
                )
                self.stdout.write(
                    f"In another shell: SPARK_CONNECT_TOKEN={shlex.quote(token)} "
                    f"SPARK_REMOTE={remote} make demo"
                )
            self.stdout.write(f"In another shell: SPARK_MASTER={cluster.master_url} make demo")
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            while all(p.poll() is None for s in servers for p in s.processes):
                time.sleep(1)
            raise CommandError("A Spark daemon exited; its log is in " + str(work))
        except KeyboardInterrupt:
            pass
        except spark_cluster.ClusterError as exc:
            raise CommandError(f"The Spark Connect server did not start: {exc}") from exc
        finally:
            for server in reversed(servers):
                server.stop()
