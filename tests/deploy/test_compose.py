"""docker-compose.yml is parsed (not run: no Docker engine here) and every command it gives
the project's image must exist in the project."""

from __future__ import annotations

import importlib
import shlex
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
OURS = {name for name, s in SERVICES.items() if s.get("build") == "."}


def commands_of(service: dict) -> list[list[str]]:
    """The command lines of a service (``sh -c`` scripts split on ``&&``)."""
    command = service["command"]
    if command[:2] == ["sh", "-c"]:
        return [shlex.split(part) for part in command[2].split("&&")]
    return [command]


def test_every_service_the_design_names_is_there():
    assert {"postgres", "redis", "web", "worker", "spark-worker-queue", "beat"} <= set(SERVICES)
    assert {"spark-master", "spark-worker"} <= set(SERVICES)
    assert {"web", "worker", "spark-worker-queue", "beat"} == OURS


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_has_a_health_check_and_a_restart_policy(name):
    service = SERVICES[name]
    assert service["healthcheck"]["test"]
    assert service["restart"] == "unless-stopped"


@pytest.mark.parametrize("name", sorted(OURS))
def test_every_command_of_the_project_image_exists(name):
    for argv in commands_of(SERVICES[name]):
        program = argv[0]
        if program == "python":
            assert argv[1] == "manage.py"
            assert argv[2] in get_commands(), f"{name}: no manage.py command {argv[2]}"
        elif program == "gunicorn":
            module, _, attr = argv[1].partition(":")
            assert callable(getattr(importlib.import_module(module), attr))
        elif program == "celery":
            assert argv[1:3] == ["-A", "bdre"]
            assert hasattr(importlib.import_module("bdre.celery"), "app")
            if argv[3] == "worker":
                queues = set(argv[argv.index("-Q") + 1].split(","))
                assert queues <= {"celery", "spark"}
        else:
            pytest.fail(f"{name}: unknown program {program}")


def test_the_two_worker_services_together_consume_both_queues():
    queues = set()
    for name in ("worker", "spark-worker-queue"):
        (argv,) = commands_of(SERVICES[name])
        queues |= set(argv[argv.index("-Q") + 1].split(","))
    assert queues == {"celery", "spark"}


def test_the_services_share_the_volumes_they_need():
    assert set(COMPOSE["volumes"]) == {"postgres", "redis", "warehouse", "landing"}
    for name in OURS | {"spark-worker"}:
        mounts = {v.split(":")[0] for v in SERVICES[name]["volumes"]}
        assert {"warehouse", "landing"} <= mounts, name
    env = SERVICES["worker"]["environment"]
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["CELERY_BROKER_URL"].startswith("redis://")
    assert env["SPARK_MASTER"] == "spark://spark-master:7077"


def test_the_image_builds_from_the_project_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for copied in ("bdre", "processes", "batches", "lineage", "manage.py"):
        assert f"COPY {copied}" in dockerfile
        assert (ROOT / copied).exists()
