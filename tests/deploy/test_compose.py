"""docker-compose.yml and the Dockerfile are parsed (not run: no Docker engine here): every
BDRE service and every Spark daemon runs the one project image with a role of its
entrypoint (bdre/entrypoint.py), whose command must exist in the project; images are pinned;
one user owns the volumes; two Spark-queue workers fit the Spark worker together, and their
drivers listen on fixed ports."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands

from bdre import entrypoint, spark_cluster
from tests.helpers.project import packages

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
THIRD_PARTY = {"postgres", "redis"}
OURS = set(SERVICES) - THIRD_PARTY
IMAGE = SERVICES["web"]["image"]

# What each service is for: its role of the image's entrypoint.
ROLES = {
    "web": "web",
    "worker": "worker",
    "spark-queue-worker": "spark-queue-worker",
    "beat": "beat",
    "spark-master": "spark-master",
    "spark-worker": "spark-worker",
    "spark-connect": "spark-connect",
}


def env_of(name: str) -> dict[str, str]:
    """The service's environment as its container gets it, with the ``${VAR:-default}``
    and ``${VAR:?message}`` substitutions of compose resolved to a default or a stand-in."""

    def resolve(value: object) -> str:
        text = str(value)
        text = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text)
        return re.sub(r"\$\{(\w+):\?[^}]*\}", r"test-\1", text)

    return {key: resolve(value) for key, value in SERVICES[name].get("environment", {}).items()}


def spark_conf(name: str) -> dict[str, str]:
    conf = json.loads(env_of(name)["SPARK_CONF"])
    assert isinstance(conf, dict)
    return conf


def mebibytes(size: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmgt])?b?", size.lower()).groups()
    return int(number) * {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2}[unit or "m"]


def test_every_service_the_design_names_is_there():
    assert set(SERVICES) == THIRD_PARTY | set(ROLES)
    assert set(COMPOSE["volumes"]) == {"postgres", "redis", "warehouse", "landing"}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_has_a_health_check_and_a_restart_policy(name):
    service = SERVICES[name]
    assert service["healthcheck"]["test"]
    assert service["restart"] == "unless-stopped"


@pytest.mark.parametrize("name", sorted(OURS))
def test_every_bdre_and_spark_service_runs_the_one_image_with_its_role(name):
    service = SERVICES[name]
    assert service["image"] == IMAGE and service["build"] == "."
    assert service["command"] == [ROLES[name]]
    assert ROLES[name] in entrypoint.ROLES


def test_images_are_pinned_to_exact_versions():
    assert not IMAGE.endswith(":latest") and re.fullmatch(r"bdre:\d+\.\d+\.\d+", IMAGE)
    for name in THIRD_PARTY:
        image = SERVICES[name]["image"]
        # major.minor (PostgreSQL's exact release) or major.minor.patch, or a digest.
        assert re.fullmatch(rf"{name}:\d+\.\d+(\.\d+)?(-\w+)?(@sha256:[0-9a-f]{{64}})?", image), (
            image
        )
    bases = re.findall(r"^FROM (\S+)", DOCKERFILE, re.MULTILINE)
    assert bases and all(re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", b) for b in bases)


@pytest.mark.parametrize("name", sorted(OURS))
def test_every_command_of_the_project_image_exists(name):
    env = entrypoint.environment(ROLES[name], {**env_of(name), "SPARK_LOCAL_HOSTNAME": "10.0.0.2"})
    argv = entrypoint.command(ROLES[name], env)
    for step in [*entrypoint.before(ROLES[name], env), argv]:
        if step[1:3] == ["-m", "django"]:
            assert step[3] in get_commands(), f"{name}: no manage.py command {step[3]}"
        elif step[1:3] == ["-m", "gunicorn"]:
            module, _, attr = step[3].partition(":")
            assert callable(getattr(importlib.import_module(module), attr))
        elif step[1:3] == ["-m", "celery"]:
            assert step[3:5] == ["-A", "bdre"]
            assert hasattr(importlib.import_module("bdre.celery"), "app")
        else:
            assert Path(step[0]) == spark_cluster.spark_home() / "bin" / "spark-class"
            assert Path(step[0]).exists()


def test_the_two_worker_services_together_consume_both_queues():
    queues = set()
    for name in ("worker", "spark-queue-worker"):
        argv = entrypoint.command(name, env_of(name))
        queues |= set(argv[argv.index("-Q") + 1].split(","))
    assert queues == {"celery", "spark"}
    spark = entrypoint.command("spark-queue-worker", env_of("spark-queue-worker"))
    assert spark[spark.index("--concurrency") + 1] == "1"


def test_the_catalog_is_published_to_a_metastore_on_the_postgresql_service():
    # The default queue's worker runs the catalog's sync (batches.tasks): with the image's
    # PostgreSQL JDBC driver, into a schema of the database BDRE already has.
    env = env_of("worker")
    metastore = env["BDRE_METASTORE_URL"]
    assert metastore.startswith("postgres://") and "@postgres:5432/" in metastore
    assert env.get("BDRE_CATALOG", "on") == "on"
    assert "libpostgresql-jdbc-java" in DOCKERFILE
    assert env_of("web")["BDRE_METASTORE_URL"] == metastore


def test_one_user_owns_the_volumes():
    # The image creates uid 1000 and gives it the mount points (a named volume takes their
    # ownership when first mounted); every service of the image runs as that user.
    assert re.search(r"useradd --uid 1000 --gid 1000", DOCKERFILE)
    assert "chown -R 1000:1000 /data /landing /var/lib/bdre" in DOCKERFILE
    assert "USER 1000:1000" in DOCKERFILE
    for name in OURS:
        assert SERVICES[name]["user"] == "1000:1000", name


def test_the_services_share_the_volumes_they_need():
    for name in OURS - {"spark-master"}:
        mounts = dict(v.split(":")[:2] for v in SERVICES[name]["volumes"])
        assert mounts["warehouse"] == "/data" and mounts["landing"] == "/landing", name
        env = env_of(name)
        assert env["BDRE_WAREHOUSE"].startswith("/data/"), name
        assert env["BDRE_LANDING"] == "/landing", name
    env = env_of("worker")
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["CELERY_BROKER_URL"].startswith("redis://redis:")


def test_the_drivers_and_the_workers_find_the_master():
    port = env_of("spark-master")["SPARK_MASTER_PORT"]
    url = f"spark://spark-master:{port}"
    assert env_of("spark-worker")["SPARK_MASTER_URL"] == url
    for name in ("worker", "spark-queue-worker", "spark-connect"):
        assert env_of(name)["SPARK_MASTER"] == url


def test_two_spark_queue_workers_share_the_spark_worker():
    replicas = SERVICES["spark-queue-worker"]["deploy"]["replicas"]
    assert replicas == 2
    worker = env_of("spark-worker")
    cores, memory = int(worker["SPARK_WORKER_CORES"]), mebibytes(worker["SPARK_WORKER_MEMORY"])
    conf = spark_conf("spark-queue-worker")
    app_cores = int(conf["spark.cores.max"])
    executor_cores = int(conf["spark.executor.cores"])
    executors = app_cores // executor_cores
    assert app_cores % executor_cores == 0 and executor_cores <= cores
    # Every replica's application gets all its cores at once on one worker.
    assert replicas * app_cores <= cores
    assert replicas * executors * mebibytes(conf["spark.executor.memory"]) <= memory


def test_the_connect_server_is_optional_and_fits_the_worker():
    service = SERVICES["spark-connect"]
    assert service["profiles"] == ["connect"]
    worker = env_of("spark-worker")
    conf = spark_conf("spark-connect")
    assert int(conf["spark.cores.max"]) <= int(worker["SPARK_WORKER_CORES"])
    assert mebibytes(conf["spark.executor.memory"]) <= mebibytes(worker["SPARK_WORKER_MEMORY"])


@pytest.mark.parametrize("name", ["spark-queue-worker", "spark-connect"])
def test_the_drivers_listen_on_fixed_ports_at_their_own_address(name):
    conf = spark_conf(name)
    assert conf["spark.driver.port"].isdigit() and conf["spark.blockManager.port"].isdigit()
    # No host in the compose file: replicas share it; the entrypoint gives each container's
    # driver its own address (tests/deploy/test_entrypoint.py).
    assert "spark.driver.host" not in conf
    env = entrypoint.environment(name, {**env_of(name), "SPARK_LOCAL_HOSTNAME": "172.18.0.7"})
    assert json.loads(env["SPARK_CONF"]) == {**conf, "spark.driver.host": "172.18.0.7"}


def test_the_image_is_built_from_every_package_of_the_project_and_starts_a_role():
    # Every package the wheel holds, as pyproject.toml says, not a list kept by hand: an app
    # left out of the image fails its web process at start-up.
    assert "alerts" in packages()
    for copied in packages():
        assert f"COPY {copied} {copied}" in DOCKERFILE
    # The pages: bdre/templates links to them, and the wheel built in the image holds them.
    assert "COPY templates templates" in DOCKERFILE
    assert "COPY pyproject.toml README.md ./" in DOCKERFILE
    assert "openjdk-17-jre-headless" in DOCKERFILE
    assert 'ENTRYPOINT ["python", "-m", "bdre.entrypoint"]' in DOCKERFILE
    assert 'CMD ["web"]' in DOCKERFILE
    # The image's SPARK_HOME is the installed PySpark, whose launcher the Spark roles run.
    home = re.search(r"SPARK_HOME=(\S+)", DOCKERFILE).group(1)
    assert home == "/usr/local/lib/python3.11/site-packages/pyspark"
