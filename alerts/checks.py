"""A job's ``alerts.*`` properties: what they may hold (checked by the registry when a job is
registered or changed, through ``GROUP_CHECKS``) and what they mean.

- ``alerts.email``: a comma list of e-mail addresses;
- ``alerts.webhook``: an http(s) URL that receives the JSON payload;
- ``alerts.on``: a comma list of kinds (failure, dead_letter, sla, freshness); default all;
- ``alerts.sla_minutes``: a run still running after this many minutes alerts (sla);
- ``alerts.freshness_hours``: no new batch from the job for this many hours alerts.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from alerts.models import Kind
from processes.registry.properties import RefusedProperty

GROUP = "alerts"
KEYS = ("email", "webhook", "on", "sla_minutes", "freshness_hours")


def split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def check_email(address: str, where: str) -> str:
    try:
        validate_email(address)
    except ValidationError as exc:
        raise RefusedProperty(f"{where}: {address!r} is not an e-mail address") from exc
    return address


def check_webhook(url: str, where: str) -> str:
    """A webhook posts to another system: only http and https, to a named host."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise RefusedProperty(f"{where}: {url!r} is not an http:// or https:// URL with a host")
    if parsed.username or parsed.password:
        raise RefusedProperty(f"{where}: put no user or password in the URL")
    return url


def check_kinds(value: str, where: str) -> list[str]:
    kinds = split(value)
    unknown = [k for k in kinds if k not in Kind.values]
    if unknown:
        raise RefusedProperty(
            f"{where}: {', '.join(unknown)} is not a kind of alert ({', '.join(Kind.values)})"
        )
    return kinds


def _positive(value: str, where: str, unit: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number > 0 or number != number or number == float("inf"):
        raise RefusedProperty(f"{where}: a positive number of {unit}, got {value!r}")
    return number


@dataclass(frozen=True)
class JobRules:
    emails: tuple[str, ...] = ()
    webhook: str = ""
    kinds: tuple[str, ...] = tuple(Kind.values)
    sla_minutes: float | None = None
    freshness_hours: float | None = None


def job_rules(values: Mapping[str, object]) -> JobRules:
    """The rules a job's ``alerts`` group holds; RefusedProperty for a value it may not
    hold. Keys may come alone (one property changed through the API)."""
    for key in values:
        if key not in KEYS:
            raise RefusedProperty(
                f"{GROUP}.{key} is not a setting of alerts; they are {', '.join(KEYS)}"
            )
    text = {key: str(value).strip() for key, value in values.items()}
    emails = tuple(check_email(a, f"{GROUP}.email") for a in split(text.get("email", "")))
    webhook = text.get("webhook", "")
    if webhook:
        check_webhook(webhook, f"{GROUP}.webhook")
    kinds = tuple(Kind.values)
    if text.get("on"):
        kinds = tuple(check_kinds(text["on"], f"{GROUP}.on"))
    sla = text.get("sla_minutes")
    fresh = text.get("freshness_hours")
    return JobRules(
        emails=emails,
        webhook=webhook,
        kinds=kinds,
        sla_minutes=_positive(sla, f"{GROUP}.sla_minutes", "minutes") if sla else None,
        freshness_hours=_positive(fresh, f"{GROUP}.freshness_hours", "hours") if fresh else None,
    )


def check_job_properties(values: Mapping[str, object]) -> None:
    job_rules(values)
