"""The sentinel secrets of an installation's environment, and what a process's environment
holds of them (read from ``/proc``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

# What an installation's worker holds in its environment, each value a sentinel to look for.
SECRETS = {
    "SECRET_KEY": "sentinel-secret-key-6d1f",
    "FIELD_ENCRYPTION_KEY": "c2VudGluZWwtZmllbGQta2V5LTZkMWYtMDEyMzQ1Njc=",
    "DATABASE_URL": "postgres://bdre:sentinel-db-password-6d1f@127.0.0.1:9/bdre",
    "CELERY_BROKER_URL": "redis://:sentinel-broker-password-6d1f@127.0.0.1:9/0",
    "BDRE_METASTORE_URL": "postgres://hive:sentinel-metastore-password-6d1f@127.0.0.1:9/m",
    "AWS_ACCESS_KEY_ID": "AKIASENTINEL6D1F",
    "AWS_SECRET_ACCESS_KEY": "sentinel-aws-secret-6d1f",
    "AWS_SESSION_TOKEN": "sentinel-aws-session-6d1f",
    "SPARK_CONNECT_TOKEN": "sentinel-connect-token-6d1f",
    "SPARK_CONNECT_AUTHENTICATE_TOKEN": "sentinel-spark-connect-token-6d1f",
    "EMAIL_HOST_PASSWORD": "sentinel-smtp-password-6d1f",
    "OPENLINEAGE_API_KEY": "sentinel-openlineage-key-6d1f",
    "BDRE_METRICS_TOKEN": "sentinel-metrics-token-6d1f",
    "HADOOP_CREDSTORE_PASSWORD": "sentinel-credstore-6d1f",
    "SPARK_CONF": '{"spark.bdre.sentinel": "sentinel-spark-conf-6d1f"}',
}


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def children(pid: int) -> Iterator[int]:
    """Every descendant of ``pid`` (from /proc/<pid>/task/*/children)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in found:
            yield child
            yield from children(child)


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def secrets_in(env: dict[str, str], *, but: str = "") -> list[str]:
    """The names of the sentinel secrets whose value ``env`` holds, or whose name (``but``
    aside: a Connect server's own token)."""
    values = set(env.values())
    found = [name for name in SECRETS if name in env and name != but]
    found += [n for n, v in SECRETS.items() if any(v in value for value in values)]
    return sorted(set(found))
