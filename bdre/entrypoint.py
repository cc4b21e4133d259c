"""The container image's entrypoint: ``python -m bdre.entrypoint ROLE [ARGS...]`` runs one
role of a BDRE deployment (docker-compose.yml, docs/operations.md "Production").

Every role ends by replacing this process with its daemon (``os.execvpe``), so that in a
container the daemon is PID 1 and gets the signals (``docker stop`` is a warm shutdown of a
Celery worker, a clean stop of a Spark daemon). ARGS are appended to the role's command.

The Spark daemons' command lines come from :mod:`bdre.spark_cluster`, the same builders the
cluster tests and ``make cluster`` run outside Docker.

Every Spark process advertises one address to the others: ``SPARK_LOCAL_HOSTNAME`` (Spark's
own variable), by default the container's own IP address. The Spark masters and workers
listen on it, and a driver (a Spark-queue worker, the Spark Connect server) gets it as
``spark.driver.host`` in ``SPARK_CONF`` unless that names one: so any number of replicas of
one service each advertise their own address, which the executors connect back to.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from bdre import spark_cluster

ROLES = (
    "web",
    "worker",
    "spark-queue-worker",
    "beat",
    "spark-master",
    "spark-worker",
    "spark-connect",
    "manage",
    "run",
)

USAGE = f"usage: python -m bdre.entrypoint ROLE [ARGS...]; ROLE is one of {', '.join(ROLES)}"

# The roles that start a Spark driver: it must be reachable by the executors.
DRIVER_ROLES = ("spark-queue-worker", "spark-connect")
DAEMON_ROLES = ("spark-master", "spark-worker")
SPARK_ROLES = (*DAEMON_ROLES, *DRIVER_ROLES)


class RoleError(ValueError):
    """An unknown role or a setting the role cannot use; the message says which."""


def _python(env: Mapping[str, str]) -> str:
    return env.get("BDRE_PYTHON", sys.executable)


def _django(env: Mapping[str, str], *args: str) -> list[str]:
    # ``python -m django`` needs no manage.py on disk: the image holds the installed package.
    return [_python(env), "-m", "django", *args]


def _celery(env: Mapping[str, str], *args: str) -> list[str]:
    return [_python(env), "-m", "celery", "-A", "bdre", *args]


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise RoleError(f"{name} must be an integer, got {raw!r}") from None


def _host(env: Mapping[str, str]) -> str:
    # main() sets it from the container's address when the environment does not.
    return env.get("SPARK_LOCAL_HOSTNAME") or "127.0.0.1"


def before(role: str, env: Mapping[str, str]) -> list[list[str]]:
    """The commands that run to completion before the role's daemon starts (the web's
    migrations and static files)."""
    if role == "web":
        return [
            _django(env, "migrate", "--noinput"),
            _django(env, "collectstatic", "--noinput"),
        ]
    return []


def command(role: str, env: Mapping[str, str], args: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The command line the role execs, from the environment ``env`` (and the extra
    ``args``, appended). Raises :class:`RoleError` for an unknown role."""
    extra = list(args)
    if role == "web":
        bind = f"0.0.0.0:{_int(env, 'PORT', 8000)}"
        workers = str(_int(env, "WEB_CONCURRENCY", 3))
        return [
            *(_python(env), "-m", "gunicorn", "bdre.wsgi:application"),
            *("--bind", bind, "--workers", workers, "--timeout", "60"),
            *extra,
        ]
    if role == "worker":
        queue = env.get("BDRE_QUEUE") or "celery"
        concurrency = str(_int(env, "CELERY_CONCURRENCY", 4))
        return _celery(
            env, "worker", "-Q", queue, "--concurrency", concurrency, "--loglevel", "INFO", *extra
        )
    if role == "spark-queue-worker":
        # One Spark step at a time per container: each step is a Spark application's driver.
        queue = env.get("BDRE_SPARK_QUEUE") or "spark"
        return _celery(
            env, "worker", "-Q", queue, "--concurrency", "1", "--loglevel", "INFO", *extra
        )
    if role == "beat":
        return _celery(env, "beat", "--loglevel", "INFO", *extra)
    if role == "spark-master":
        return [
            *spark_cluster.master_command(
                _host(env),
                _int(env, "SPARK_MASTER_PORT", 7077),
                _int(env, "SPARK_MASTER_WEBUI_PORT", 8080),
            ),
            *extra,
        ]
    if role == "spark-worker":
        master = env.get("SPARK_MASTER_URL") or "spark://spark-master:7077"
        var = Path(env.get("BDRE_VAR_DIR") or "/var/lib/bdre")
        worker = spark_cluster.worker_command(
            master,
            host=_host(env),
            cores=_int(env, "SPARK_WORKER_CORES", 2),
            memory=env.get("SPARK_WORKER_MEMORY") or "2g",
            ui_port=_int(env, "SPARK_WORKER_WEBUI_PORT", 8081),
            work_dir=Path(env.get("SPARK_WORKER_DIR") or var / "spark-work"),
        )
        # The master URL stays last, after any extra option.
        return [*worker[:-1], *extra, worker[-1]]
    if role == "spark-connect":
        # The server's static settings (the SQL sandbox's) are the app's: a management
        # command builds them and execs bdre.spark_cluster.connect_command.
        port = str(_int(env, "SPARK_CONNECT_PORT", 15002))
        return _django(env, "spark_connect_server", "--port", port, *extra)
    if role == "manage":
        return _django(env, *extra)
    if role == "run":
        if not extra:
            raise RoleError("run: name the program to run, e.g. `run python -V`")
        return extra
    raise RoleError(f"unknown role {role!r}; {USAGE}")


def environment(role: str, env: Mapping[str, str]) -> dict[str, str]:
    """The environment the role's commands run with: ``env``, with Django's settings module,
    and for the Spark roles Spark's home, no daemonizing, and for a driver
    ``spark.driver.host`` in ``SPARK_CONF`` (``SPARK_LOCAL_HOSTNAME`` unless set)."""
    result = dict(env)
    result.setdefault("DJANGO_SETTINGS_MODULE", "bdre.settings")
    if role in SPARK_ROLES:
        result["SPARK_NO_DAEMONIZE"] = "1"
    if role in DRIVER_ROLES:
        raw = result.get("SPARK_CONF", "").strip() or "{}"
        try:
            conf = json.loads(raw)
        except ValueError as exc:
            raise RoleError(f"SPARK_CONF must be a JSON object: {exc}") from None
        if not isinstance(conf, dict):
            raise RoleError(f"SPARK_CONF must be a JSON object, got {raw!r}")
        conf.setdefault("spark.driver.host", _host(result))
        result["SPARK_CONF"] = json.dumps(conf)
    return result


def own_address(
    hostname: Callable[[], str] = socket.gethostname,
    resolve: Callable[[str], str] = socket.gethostbyname,
) -> str:
    """The address other containers reach this one at: its hostname's address (Docker puts
    the container's IP in its /etc/hosts), or 127.0.0.1 outside a container where the
    hostname resolves to a loopback address (Debian's 127.0.1.1) or not at all."""
    try:
        address = resolve(hostname())
    except OSError:
        return "127.0.0.1"
    return "127.0.0.1" if address.startswith("127.") else address


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.exit(USAGE)
    role, args = argv[0], argv[1:]
    env = dict(os.environ)
    if role in SPARK_ROLES and not env.get("SPARK_LOCAL_HOSTNAME"):
        env["SPARK_LOCAL_HOSTNAME"] = own_address()
    try:
        run_env = environment(role, env)
        if role in SPARK_ROLES:
            run_env.setdefault("SPARK_HOME", str(spark_cluster.spark_home()))
        final = command(role, run_env, args)
        steps = before(role, run_env)
    except RoleError as exc:
        sys.exit(f"bdre.entrypoint: {exc}")
    for step in steps:
        print("bdre.entrypoint:", " ".join(step), flush=True)
        done = subprocess.run(step, env=run_env, check=False)
        if done.returncode:
            sys.exit(done.returncode)
    print("bdre.entrypoint: exec", " ".join(final), flush=True)
    if role in DAEMON_ROLES:
        # A Spark daemon's JVM (and the executors a worker starts) keeps none of the
        # installation's secrets; the driver roles' JVMs are started by BDRE's own code,
        # which strips them too (bdre.spark_cluster.jvm_env).
        run_env = spark_cluster.jvm_env(run_env)
    try:
        os.execvpe(final[0], final, run_env)
    except OSError as exc:
        sys.exit(f"bdre.entrypoint: cannot run {final[0]}: {exc}")


if __name__ == "__main__":
    main()
