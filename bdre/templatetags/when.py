"""How long ago, in words a reader takes in at a glance, with the exact time (UTC) on hover."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince, timeuntil

register = template.Library()


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _tag(value: datetime, title: str, words: str) -> SafeString:
    return format_html('<time datetime="{}" title="{}">{}</time>', value.isoformat(), title, words)


def _words(value: datetime, now: datetime | None) -> str | None:
    """None under a minute, where Django's timesince says "0 minutes"."""
    if ((now or timezone.now()) - value).total_seconds() < 60:
        return None
    return timesince(value, now)


@register.filter
def ago(value: datetime | None, now: datetime | None = None) -> SafeString | str:
    """``3 minutes ago``, ``just now`` under a minute."""
    if value is None:
        return ""
    words = _words(value, now)
    return _tag(value, _utc(value), "just now" if words is None else f"{words} ago")


@register.filter
def age(value: datetime | None, now: datetime | None = None) -> SafeString | str:
    """How long something has waited: ``5 minutes``, ``under a minute``."""
    if value is None:
        return ""
    words = _words(value, now)
    return _tag(value, f"since {_utc(value)}", "under a minute" if words is None else words)


@register.filter
def until(value: datetime | None, now: datetime | None = None) -> SafeString | str:
    """When something is due: ``in 12 s`` for a timer of seconds, ``in 3 hours``."""
    if value is None:
        return ""
    seconds = (value - (now or timezone.now())).total_seconds()
    if seconds <= 0:
        words = "due now"
    elif seconds < 60:
        words = f"in {int(seconds) or 1} s"
    else:
        words = f"in {timeuntil(value, now)}"
    return _tag(value, _utc(value), words)
