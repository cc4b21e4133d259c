"""A standalone Spark cluster on this machine, from the PySpark wheel's own launcher
(``bin/spark-class``): one Master and one Worker on 127.0.0.1, and a Spark Connect server.
``make cluster`` (``manage.py spark_cluster``) runs them in the foreground for a user; the
``cluster`` tests start them for the session (docs/operations.md, "A cluster on one
machine").

The wheel has no ``sbin/start-master.sh``; ``spark-class`` runs the same classes the scripts
would, in processes this module owns and stops.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


class ClusterError(RuntimeError):
    """The cluster did not come up; the message holds the end of the daemon's log."""


def spark_home() -> Path:
    """The PySpark wheel's Spark (``bin/``, ``jars/``), unless ``SPARK_HOME`` names another."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).parent


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Cluster:
    host: str
    port: int
    ui_port: int
    work_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    def state(self) -> dict[str, object]:
        """The master's own account (``/json``): workers, cores, running applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as answer:
            state: dict[str, object] = json.load(answer)
            return state

    def alive_workers(self) -> int:
        workers = self.state().get("workers", [])
        assert isinstance(workers, list)
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def stop(self) -> None:
        _stop(self.processes)


@dataclass
class ConnectServer:
    host: str
    port: int
    master: str
    work_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def remote_url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def stop(self) -> None:
        _stop(self.processes)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    # spark-class execs the JVM, so each process group is one daemon. The last started goes
    # first (a Worker before its Master, which then does not log it as lost).
    for process in reversed(processes):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    processes.clear()


# The daemons' command lines: the same here and in the container image's entrypoint
# (bdre/entrypoint.py), so what the cluster tests run is what docker-compose runs.


def master_command(host: str, port: int, ui_port: int) -> list[str]:
    return [
        str(spark_home() / "bin" / "spark-class"),
        "org.apache.spark.deploy.master.Master",
        *("--host", host, "--port", str(port), "--webui-port", str(ui_port)),
    ]


def worker_command(
    master_url: str, *, host: str, cores: int, memory: str, ui_port: int, work_dir: Path
) -> list[str]:
    return [
        str(spark_home() / "bin" / "spark-class"),
        "org.apache.spark.deploy.worker.Worker",
        *("--host", host, "--cores", str(cores), "--memory", memory),
        *("--webui-port", str(ui_port), "--work-dir", str(work_dir)),
        master_url,
    ]


def connect_command(master: str, conf: dict[str, str]) -> list[str]:
    """A Spark Connect server (the wheel's ``SparkConnectServer``, as
    ``sbin/start-connect-server.sh`` runs it) on ``master``; ``conf`` holds its binding
    (``spark.connect.grpc.binding.address``/``port``) and its session's static settings."""
    return [
        str(spark_home() / "bin" / "spark-class"),
        "org.apache.spark.deploy.SparkSubmit",
        *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
        *("--name", "BDRE Spark Connect server", "--master", master),
        *(arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")),
        "spark-internal",
    ]


def daemon_env() -> dict[str, str]:
    # SPARK_NO_DAEMONIZE: the JVM stays this process (spark-class execs it), to be stopped.
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_NO_DAEMONIZE": "1"}


def _daemon(owner: Cluster | ConnectServer, name: str, command: list[str]) -> None:
    with (owner.work_dir / f"{name}.log").open("ab") as log:
        owner.processes.append(
            subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=daemon_env(),
                cwd=owner.work_dir,
                start_new_session=True,
            )
        )


def _log_tail(owner: Cluster | ConnectServer) -> str:
    tails = []
    for name in ("master", "worker", "connect"):
        path = owner.work_dir / f"{name}.log"
        if path.exists():
            tails.append(f"--- {name}.log\n" + "\n".join(path.read_text().splitlines()[-15:]))
    return "\n".join(tails)


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def start(
    work_dir: Path,
    *,
    cores: int = 2,
    memory: str = "2g",
    host: str = "127.0.0.1",
    port: int = 0,
    ui_port: int = 0,
    timeout: float = 90,
) -> Cluster:
    """A Master and one Worker (``cores``, ``memory`` for executors), up and registered; stop
    it with :meth:`Cluster.stop`. Port 0 picks a free one."""
    work_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(host, port or free_port(host), ui_port or free_port(host), work_dir)
    try:
        _daemon(cluster, "master", master_command(host, cluster.port, cluster.ui_port))
        worker = worker_command(
            cluster.master_url,
            host=host,
            cores=cores,
            memory=memory,
            ui_port=free_port(host),
            work_dir=work_dir / "work",
        )
        _daemon(cluster, "worker", worker)
        deadline = time.monotonic() + timeout
        while True:
            if any(p.poll() is not None for p in cluster.processes):
                raise ClusterError(f"a Spark daemon exited\n{_log_tail(cluster)}")
            try:
                if cluster.alive_workers() >= 1:
                    return cluster
            except OSError:
                pass  # the master's UI is not listening yet
            if time.monotonic() > deadline:
                raise ClusterError(f"no worker registered in {timeout:.0f} s\n{_log_tail(cluster)}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise


def start_connect(
    work_dir: Path,
    *,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = 90,
) -> ConnectServer:
    """A Spark Connect server on ``master``, listening on ``host:port``, with ``conf`` as its
    session's configuration: static settings (the SQL sandbox's, the warehouse) can only be
    set here, never by a client. Stop it with :meth:`ConnectServer.stop`."""
    work_dir.mkdir(parents=True, exist_ok=True)
    server = ConnectServer(host, port or free_port(host), master, work_dir)
    settings = {
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(server.port),
        **(conf or {}),
    }
    try:
        _daemon(server, "connect", connect_command(master, settings))
        deadline = time.monotonic() + timeout
        while not _listening(host, server.port):
            if server.processes[0].poll() is not None:
                raise ClusterError(f"the Spark Connect server exited\n{_log_tail(server)}")
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"no Spark Connect server in {timeout:.0f} s\n{_log_tail(server)}"
                )
            time.sleep(0.5)
        return server
    except BaseException:
        server.stop()
        raise
