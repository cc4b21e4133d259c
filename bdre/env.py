"""Typed readers for settings that come from the environment, and only from there."""

from __future__ import annotations

import json
import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_spark_conf(name: str) -> dict[str, str]:
    """A JSON object of Spark options (``{"spark.cores.max": "2"}``); every key a ``spark.``
    one, every value a string, a number or a boolean (as Spark reads them: text)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f'{name} must be a JSON object of Spark options, e.g. {{"spark.cores.max": "2"}}: {exc}'
        ) from exc
    if not isinstance(parsed, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object, got {type(parsed).__name__}")
    conf = {}
    for key, value in parsed.items():
        if not key.startswith("spark."):
            raise ImproperlyConfigured(f"{name}: {key!r} is not a Spark option (spark.*)")
        if isinstance(value, bool):
            value = str(value).lower()
        if not isinstance(value, str | int | float):
            raise ImproperlyConfigured(f"{name}: {key} must be text or a number")
        conf[key] = str(value)
    return conf
