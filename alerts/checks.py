"""A job's ``alerts.*`` properties: what they may hold (checked by the registry when a job is
registered or changed, through ``GROUP_CHECKS``) and what they mean.

- ``alerts.email``: a comma list of e-mail addresses;
- ``alerts.webhook``: an http(s) URL the installation may call (``alerts.outbound``) that
  receives the JSON payload;
- ``alerts.on``: a comma list of kinds (failure, dead_letter, sla, freshness, check); default all;
- ``alerts.sla_minutes``: a run still running after this many minutes alerts (sla);
- ``alerts.freshness_hours``: no new batch from the job for this many hours alerts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from alerts import outbound
from alerts.models import Kind
from processes.step_kinds import RefusedProperty

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
    """A webhook posts to another system, from inside the installation's network: only to a
    URL the installation allows (``alerts.outbound``), checked again when it is called."""
    try:
        outbound.check(url)
    except outbound.Refused as exc:
        raise RefusedProperty(f"{where}: {exc}") from exc
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
    # The webhook is checked where it is set and where it is called (check_job_properties,
    # outbound.post), not where the rules are read: a DNS answer is no reason to drop the
    # job's other destinations, and reading the rules should not wait on a resolver.
    webhook = text.get("webhook", "")
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
    rules = job_rules(values)
    if rules.webhook:
        check_webhook(rules.webhook, f"{GROUP}.webhook")
