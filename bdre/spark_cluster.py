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
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Mapping
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


@dataclass
class Daemons:
    """Spark daemons this module started, in process groups of their own, until ``stop``."""

    host: str
    port: int
    work_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list, kw_only=True)
    # Where this start's lines begin in each daemon's log (a user's work dir keeps the
    # logs of earlier starts).
    log_offsets: dict[str, int] = field(default_factory=dict, kw_only=True)

    def stop(self) -> None:
        # spark-class execs the JVM, so each process group is one daemon. The last started
        # goes first (a Worker before its Master, which then does not log it as lost).
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()


@dataclass
class Cluster(Daemons):
    ui_port: int

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


@dataclass
class ConnectServer(Daemons):
    master: str
    # What the server requires of its clients (``spark.connect.authenticate.token``).
    token: str = field(default="", repr=False)

    @property
    def remote_url(self) -> str:
        """The server's address for a client, with its token. PySpark's own client sends a
        token only over TLS or to a server it calls ``localhost`` (no TLS): so the
        loopback address is named so. BDRE's workers send it either way
        (``processes.step_kinds.spark_session.connect_channel``)."""
        if not self.token:
            return f"sc://{self.host}:{self.port}"
        host = "localhost" if self.host == "127.0.0.1" else self.host
        return f"sc://{host}:{self.port}/;token={self.token}"


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


CONNECT_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService"


def connect_conf(conf: dict[str, str], host: str, port: int) -> dict[str, str]:
    """A Connect server's ``--conf`` settings: its session's (``conf``) and its binding."""
    return {
        **conf,
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
    }


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


# --- the environment of a Spark JVM ----------------------------------------------------------
#
# A Spark JVM runs team code (the steps' Spark SQL, in a worker's driver or a Connect
# server) and forks the Python workers of its executors, which inherit its environment. The
# installation's secrets (SECRET_KEY, FIELD_ENCRYPTION_KEY, DATABASE_URL with its password,
# the broker's and the metastore's URLs, AWS keys, SPARK_CONF's object-store keys) are the
# Django process's, never the JVM's: it keeps only what Java, Spark's launch scripts and the
# Python workers need. An allowlist, so that a setting added to BDRE later stays out too.
JVM_ENV_NAMES = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "HOSTNAME", "TMPDIR", "TERM"),
        *("LANG", "LANGUAGE", "TZ", "JAVA_HOME", "JAVA_TOOL_OPTIONS"),
        # The executors' Python: the worker's interpreter and its packages.
        *("PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV"),
    }
)
JVM_ENV_PREFIXES = ("SPARK_", "PYSPARK_", "HADOOP_", "LC_")
# BDRE's own settings that happen to look like Spark's: SPARK_CONF may hold object-store
# keys, SPARK_REMOTE a token; the Connect server's token only through connect_token below.
NOT_JVM_ENV = frozenset(
    {"SPARK_CONF", "SPARK_REMOTE", "SPARK_CONNECT_TOKEN", "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
)
# Even under an allowed prefix (HADOOP_CREDSTORE_PASSWORD, PYSPARK_GATEWAY_SECRET...).
_SECRET_NAME = re.compile(r"SECRET|PASSW|TOKEN|CREDENTIAL|KEY", re.IGNORECASE)
_PASSWORD_IN_URL = re.compile(r"://[^/@\s]*:[^/@\s]*@")
CONNECT_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # Spark's own name for it


def jvm_env(env: Mapping[str, str]) -> dict[str, str]:
    """What a Spark JVM started from a process with environment ``env`` keeps of it: the
    names and prefixes above, none secret-looking, no URL with a password. Every place that
    starts a Spark JVM (a worker's driver, the Connect server, the standalone daemons) uses
    this."""
    return {
        name: value
        for name, value in env.items()
        if (name in JVM_ENV_NAMES or name.startswith(JVM_ENV_PREFIXES))
        and name not in NOT_JVM_ENV
        and not _SECRET_NAME.search(name)
        and not _PASSWORD_IN_URL.search(value)
    }


def daemon_env(env: Mapping[str, str] | None = None, *, connect_token: str = "") -> dict[str, str]:
    """A Spark daemon's environment: :func:`jvm_env` of ``env`` (this process's), Spark's
    home, and for a Connect server its token (``connect_token``). The token goes in the
    environment, Spark's own ``SPARK_CONNECT_AUTHENTICATE_TOKEN``: on the command line any
    local user's ``ps`` and ``spark_connect_server --print`` would show it, and as a
    ``spark.connect.authenticate.token`` setting every client could read it back with
    ``conf.get`` and a run would record it."""
    daemon = {
        **jvm_env(os.environ if env is None else env),
        "SPARK_HOME": str(spark_home()),
        # The JVM stays this process (spark-class execs it), to be stopped.
        "SPARK_NO_DAEMONIZE": "1",
    }
    if connect_token:
        daemon[CONNECT_TOKEN_ENV] = connect_token
    return daemon


def _daemon(owner: Daemons, name: str, command: list[str], *, connect_token: str = "") -> None:
    path = owner.work_dir / f"{name}.log"
    with path.open("ab") as log:
        owner.log_offsets[name] = log.tell()
        owner.processes.append(
            subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=daemon_env(connect_token=connect_token),
                cwd=owner.work_dir,
                start_new_session=True,
            )
        )


_STARTED = re.compile(rb"Successfully started service '([^']+)' on port (\d+)\.")


def bound_port(log: Path, service: str, offset: int = 0) -> int | None:
    """The port a daemon's ``service`` listens on, from its log (read from ``offset``), once
    it has bound one.

    Spark binds the port it is given, the next one when that is taken, or any free one for
    0: the log, not the port asked for, is the only answer that cannot race with another
    process taking a port that looked free.
    """
    with log.open("rb") as lines:
        lines.seek(offset)
        ports = [int(m[2]) for m in _STARTED.finditer(lines.read()) if m[1].decode() == service]
    return ports[-1] if ports else None


def _wait_for_port(owner: Daemons, name: str, service: str, deadline: float) -> int:
    log = owner.work_dir / f"{name}.log"
    while (port := bound_port(log, service, owner.log_offsets[name])) is None:
        if any(p.poll() is not None for p in owner.processes):
            raise ClusterError(f"a Spark daemon exited\n{_log_tail(owner)}")
        if time.monotonic() > deadline:
            raise ClusterError(f"{service} did not start\n{_log_tail(owner)}")
        time.sleep(0.2)
    return port


def _log_tail(owner: Daemons) -> str:
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
    it with :meth:`Cluster.stop`. Port 0 lets Spark pick a free one; the ports on the
    returned cluster are the ones bound."""
    work_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(host=host, port=port, work_dir=work_dir, ui_port=ui_port)
    deadline = time.monotonic() + timeout
    try:
        _daemon(cluster, "master", master_command(host, port, ui_port))
        cluster.port = _wait_for_port(cluster, "master", "sparkMaster", deadline)
        cluster.ui_port = _wait_for_port(cluster, "master", "MasterUI", deadline)
        worker = worker_command(
            cluster.master_url,
            host=host,
            cores=cores,
            memory=memory,
            ui_port=0,
            work_dir=work_dir / "work",
        )
        _daemon(cluster, "worker", worker)
        while True:
            if any(p.poll() is not None for p in cluster.processes):
                raise ClusterError(f"a Spark daemon exited\n{_log_tail(cluster)}")
            try:
                if cluster.alive_workers() >= 1:
                    return cluster
            except OSError:
                pass  # the master's UI is not serving yet
            if time.monotonic() > deadline:
                raise ClusterError(f"no worker registered in {timeout:.0f} s\n{_log_tail(cluster)}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise


def new_token() -> str:
    """A Spark Connect server's token, when the installation has none (``make cluster``)."""
    return secrets.token_urlsafe(32)


def start_connect(
    work_dir: Path,
    *,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = 90,
    token: str | None = None,
) -> ConnectServer:
    """A Spark Connect server on ``master``, listening on ``host:port`` (0: a free port, the
    one bound is on the returned server), with ``conf`` as its session's configuration:
    static settings (the SQL sandbox's, the warehouse) can only be set here, never by a
    client. It answers only clients that send ``token`` (a new one when None: the server's
    ``remote_url`` carries it). Stop it with :meth:`ConnectServer.stop`."""
    work_dir.mkdir(parents=True, exist_ok=True)
    token = token or new_token()
    server = ConnectServer(host=host, port=port, work_dir=work_dir, master=master, token=token)
    settings = connect_conf(conf or {}, host, port)
    deadline = time.monotonic() + timeout
    try:
        _daemon(server, "connect", connect_command(master, settings), connect_token=token)
        server.port = _wait_for_port(server, "connect", CONNECT_SERVICE, deadline)
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
