"""The image's entrypoint (bdre/entrypoint.py): the command each role starts, the
environment it starts it with, and that it replaces itself with the daemon. The Spark roles
run exactly the command lines of bdre/spark_cluster.py, which the cluster tests and
``make cluster`` run outside Docker; the last test here starts the master and worker roles
outside Docker (marked ``cluster``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command, get_commands

from bdre import entrypoint, spark_cluster
from processes.management.commands.spark_connect_server import server_conf
from processes.step_kinds.spark_conf import SANDBOX_CONF
from processes.step_kinds.spark_session import session_conf

PY = sys.executable
CELERY = [PY, "-m", "celery", "-A", "bdre"]


def test_web_migrates_collects_static_files_then_serves():
    env = {"PORT": "8001", "WEB_CONCURRENCY": "5"}
    assert entrypoint.before("web", env) == [
        [PY, "-m", "django", "migrate", "--noinput"],
        [PY, "-m", "django", "collectstatic", "--noinput"],
    ]
    assert entrypoint.command("web", env) == [
        *(PY, "-m", "gunicorn", "bdre.wsgi:application"),
        *("--bind", "0.0.0.0:8001", "--workers", "5", "--timeout", "60"),
    ]
    assert entrypoint.command("web", {})[5:9] == ["0.0.0.0:8000", "--workers", "3", "--timeout"]


def test_the_workers_and_beat():
    assert entrypoint.command("worker", {}) == [
        *CELERY,
        *("worker", "-Q", "celery", "--concurrency", "4", "--loglevel", "INFO"),
    ]
    assert entrypoint.command("worker", {"CELERY_CONCURRENCY": "8"}, ["-n", "w1@%h"]) == [
        *CELERY,
        *("worker", "-Q", "celery", "--concurrency", "8", "--loglevel", "INFO", "-n", "w1@%h"),
    ]
    assert entrypoint.command("spark-queue-worker", {"BDRE_SPARK_QUEUE": "big"}) == [
        *CELERY,
        *("worker", "-Q", "big", "--concurrency", "1", "--loglevel", "INFO"),
    ]
    assert entrypoint.command("beat", {}) == [*CELERY, "beat", "--loglevel", "INFO"]
    for role in ("worker", "spark-queue-worker", "beat", "spark-master", "spark-worker"):
        assert entrypoint.before(role, {}) == []


def test_the_spark_master_runs_the_cluster_fixtures_command():
    env = {"SPARK_LOCAL_HOSTNAME": "172.18.0.3"}
    assert entrypoint.command("spark-master", env) == spark_cluster.master_command(
        "172.18.0.3", 7077, 8080
    )
    env |= {"SPARK_MASTER_PORT": "7177", "SPARK_MASTER_WEBUI_PORT": "8180"}
    assert entrypoint.command("spark-master", env) == spark_cluster.master_command(
        "172.18.0.3", 7177, 8180
    )


def test_the_spark_worker_runs_the_cluster_fixtures_command():
    env = {"SPARK_LOCAL_HOSTNAME": "172.18.0.4", "BDRE_VAR_DIR": "/var/lib/bdre"}
    assert entrypoint.command("spark-worker", env) == spark_cluster.worker_command(
        "spark://spark-master:7077",
        host="172.18.0.4",
        cores=2,
        memory="2g",
        ui_port=8081,
        work_dir=Path("/var/lib/bdre/spark-work"),
    )
    env |= {
        "SPARK_MASTER_URL": "spark://m:7000",
        "SPARK_WORKER_CORES": "4",
        "SPARK_WORKER_MEMORY": "4g",
        "SPARK_WORKER_WEBUI_PORT": "8082",
        "SPARK_WORKER_DIR": "/tmp/w",
    }
    argv = entrypoint.command("spark-worker", env, ["--port", "7100"])
    expected = spark_cluster.worker_command(
        "spark://m:7000", host="172.18.0.4", cores=4, memory="4g", ui_port=8082,
        work_dir=Path("/tmp/w"),
    )  # fmt: skip
    assert argv == [*expected[:-1], "--port", "7100", "spark://m:7000"]


def test_the_connect_role_runs_the_server_command_with_the_sandbox(settings):
    assert entrypoint.command("spark-connect", {}) == [
        *(PY, "-m", "django", "spark_connect_server", "--port", "15002"),
    ]
    assert "spark_connect_server" in get_commands()
    # What the command execs: the cluster fixture's builder, with a BDRE session's settings.
    settings.SPARK_MASTER = "spark://spark-master:7077"
    settings.SPARK_CONF = {"spark.cores.max": "2", "spark.driver.host": "172.18.0.9"}
    conf = server_conf("spark://spark-master:7077", "0.0.0.0", 15003)
    assert _printed("spark_connect_server", "--port", "15003") == spark_cluster.connect_command(
        "spark://spark-master:7077", conf
    )
    assert conf == {
        **session_conf("spark://spark-master:7077"),
        "spark.connect.grpc.binding.address": "0.0.0.0",
        "spark.connect.grpc.binding.port": "15003",
    }
    assert SANDBOX_CONF.items() <= conf.items()
    assert conf["spark.cores.max"] == "2" and conf["spark.driver.host"] == "172.18.0.9"
    assert conf["spark.pyspark.python"] == PY
    assert conf["spark.sql.warehouse.dir"] == str(settings.BDRE_WAREHOUSE / "spark-warehouse")


def test_the_connect_server_keeps_the_sandbox_and_one_core_by_default(settings):
    settings.SPARK_CONF = {}
    assert server_conf("spark://m:7077", "0.0.0.0", 1)["spark.cores.max"] == "1"
    assert "spark.cores.max" not in server_conf("yarn", "0.0.0.0", 1)
    settings.SPARK_CONF = {"spark.sql.restrictedMode.enabled": "false"}
    with pytest.raises(ImproperlyConfigured, match="restrictedMode"):
        _printed("spark_connect_server")


def _printed(*args: str) -> list[str]:
    import io
    import shlex

    out = io.StringIO()
    call_command(*args, "--print", stdout=out)
    return shlex.split(out.getvalue())


def test_manage_and_run():
    assert entrypoint.command("manage", {}, ["createsuperuser"]) == [
        *(PY, "-m", "django", "createsuperuser"),
    ]
    assert entrypoint.command("run", {}, ["sh", "-c", "true"]) == ["sh", "-c", "true"]
    with pytest.raises(entrypoint.RoleError, match="name the program"):
        entrypoint.command("run", {})


def test_an_unknown_role_is_refused_with_the_list_of_roles(capsys):
    with pytest.raises(entrypoint.RoleError, match=r"unknown role 'nope'.*spark-queue-worker"):
        entrypoint.command("nope", {})
    with pytest.raises(SystemExit) as exit:
        entrypoint.main(["nope"])
    assert "bdre.entrypoint: unknown role 'nope'" in str(exit.value.code)
    for args in ([], ["--help"]):
        with pytest.raises(SystemExit) as exit:
            entrypoint.main(args)
        assert str(exit.value.code).startswith("usage: python -m bdre.entrypoint ROLE")


def test_an_unknown_role_exits_non_zero_from_the_command_line():
    done = subprocess.run(
        [PY, "-m", "bdre.entrypoint", "spark-mastr"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "unknown role 'spark-mastr'" in done.stderr and "spark-master" in done.stderr


def test_the_drivers_advertise_their_own_address():
    env = {"SPARK_LOCAL_HOSTNAME": "172.18.0.5", "SPARK_CONF": '{"spark.driver.port": "7078"}'}
    for role in ("spark-queue-worker", "spark-connect"):
        conf = json.loads(entrypoint.environment(role, env)["SPARK_CONF"])
        assert conf == {"spark.driver.port": "7078", "spark.driver.host": "172.18.0.5"}
    # A host the operator names stays.
    named = {**env, "SPARK_CONF": '{"spark.driver.host": "driver.example"}'}
    conf = json.loads(entrypoint.environment("spark-queue-worker", named)["SPARK_CONF"])
    assert conf["spark.driver.host"] == "driver.example"
    # Nothing else touches SPARK_CONF; every role gets the settings module.
    assert "SPARK_CONF" not in entrypoint.environment("worker", {})
    assert entrypoint.environment("beat", {})["DJANGO_SETTINGS_MODULE"] == "bdre.settings"
    assert entrypoint.environment("spark-worker", {})["SPARK_NO_DAEMONIZE"] == "1"
    with pytest.raises(entrypoint.RoleError, match="SPARK_CONF must be a JSON object"):
        entrypoint.environment("spark-queue-worker", {"SPARK_CONF": "spark.cores.max=2"})


def test_the_containers_own_address():
    assert entrypoint.own_address(lambda: "c0ffee", lambda h: "172.18.0.6") == "172.18.0.6"
    # Outside a container: Debian's hostname entry, or no entry at all.
    assert entrypoint.own_address(lambda: "laptop", lambda h: "127.0.1.1") == "127.0.0.1"

    def unknown(host: str) -> str:
        raise OSError("no such host")

    assert entrypoint.own_address(lambda: "laptop", unknown) == "127.0.0.1"


def test_main_runs_the_steps_then_execs_the_daemon(monkeypatch):
    ran, execd = [], []
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda argv, **kw: ran.append(argv) or subprocess.CompletedProcess(argv, 0),
    )
    monkeypatch.setattr(os, "execvpe", lambda file, argv, env: execd.append((file, argv, env)))
    monkeypatch.setenv("SPARK_CONF", "{}")
    entrypoint.main(["web", "--access-logfile", "-"])
    assert ran == entrypoint.before("web", {})
    ((file, argv, env),) = execd
    assert argv == entrypoint.command("web", {}, ["--access-logfile", "-"]) and file == PY
    # A driver role gets its address from the container when the environment has none.
    execd.clear()
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME", raising=False)
    monkeypatch.setattr(entrypoint, "own_address", lambda: "172.18.0.8")
    entrypoint.main(["spark-queue-worker"])
    ((_, _, env),) = execd
    assert json.loads(env["SPARK_CONF"])["spark.driver.host"] == "172.18.0.8"
    assert env["SPARK_HOME"] == str(spark_cluster.spark_home())


def test_main_stops_when_a_step_fails(monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(argv, 3))
    monkeypatch.setattr(os, "execvpe", lambda *a: pytest.fail("the daemon must not start"))
    with pytest.raises(SystemExit) as exit:
        entrypoint.main(["web"])
    assert exit.value.code == 3


def test_the_role_replaces_the_entrypoint_process():
    # PID 1 in a container is the daemon itself: the program runs in the entrypoint's process.
    process = subprocess.Popen(
        [PY, "-m", "bdre.entrypoint", "run", PY, "-c", "import os; print(os.getpid())"],
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = process.communicate(timeout=60)
    assert out.splitlines()[-1] == str(process.pid)
    assert process.returncode == 0


@pytest.mark.cluster
def test_the_spark_roles_start_a_cluster_outside_docker(tmp_path):
    """The master, worker and Connect roles as docker-compose runs them, on 127.0.0.1 and
    free ports: the worker registers with the master, and a query through the Connect
    server runs on the cluster with the SQL sandbox's settings."""
    # Port 0 everywhere: Spark binds free ports and logs them, so nothing can take a port
    # between choosing it and binding it.
    env = {
        **os.environ,
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "SPARK_MASTER_PORT": "0",
        "SPARK_MASTER_WEBUI_PORT": "0",
        "SPARK_WORKER_CORES": "2",
        "SPARK_WORKER_MEMORY": "2g",
        "SPARK_WORKER_WEBUI_PORT": "0",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "SPARK_CONNECT_PORT": "0",
        "SPARK_CONF": json.dumps({"spark.executor.memory": "1g"}),
        "BDRE_WAREHOUSE": str(tmp_path / "warehouse"),
        "SPARK_CONNECT_TOKEN": "compose-token",
    }
    cluster = spark_cluster.Cluster(host="127.0.0.1", port=0, ui_port=0, work_dir=tmp_path)

    def start(role: str) -> None:
        with (tmp_path / f"{role}.log").open("ab") as log:
            cluster.processes.append(
                subprocess.Popen(
                    [PY, "-m", "bdre.entrypoint", role],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=tmp_path,
                    start_new_session=True,
                )
            )

    def wait(ready, what: str) -> None:
        deadline = time.monotonic() + 90
        while True:
            assert all(p.poll() is None for p in cluster.processes), f"a daemon exited: {what}"
            try:
                if ready():
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, f"not ready: {what}"
            time.sleep(0.5)

    def bound(role: str, service: str) -> int:
        found: list[int] = []

        def ready() -> bool:
            port = spark_cluster.bound_port(tmp_path / f"{role}.log", service)
            found.extend([port] if port else [])
            return bool(found)

        wait(ready, f"{role}'s {service}")
        return found[0]

    try:
        start("spark-master")
        cluster.port = bound("spark-master", "sparkMaster")
        cluster.ui_port = bound("spark-master", "MasterUI")
        env["SPARK_MASTER_URL"] = env["SPARK_MASTER"] = cluster.master_url
        start("spark-worker")
        wait(lambda: cluster.alive_workers() == 1, "the worker")
        (worker,) = cluster.state()["workers"]
        assert worker["host"] == "127.0.0.1" and worker["cores"] == 2
        start("spark-connect")
        connect = bound("spark-connect", spark_cluster.CONNECT_SERVICE)
        wait(lambda: spark_cluster._listening("127.0.0.1", connect), "the Connect server")
        query = (
            "from pyspark.sql import SparkSession\n"
            f"s = SparkSession.builder.remote('sc://localhost:{connect}/;token=compose-token')"
            ".getOrCreate()\n"
            "print(s.range(5).count(), s.conf.get('spark.sql.restrictedMode.enabled'))\n"
        )
        done = subprocess.run(
            [PY, "-c", query], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.stdout.split() == ["5", "true"], done.stderr[-2000:]
        # The server's application took one core of the standalone master (the default).
        (app,) = cluster.state()["activeapps"]
        assert app["cores"] == 1
    finally:
        cluster.stop()
