"""Failed authentications: counted per user name and per address in the cache, refused for a
while past a limit, and logged to ``bdre.security`` (user name, address, reason; never the
password or the token)."""

from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.dispatch import receiver
from django.http import HttpRequest

log = logging.getLogger("bdre.security")

LOGIN = "login"  # passwords: the log-in page, the admin's, POST /api/v1/auth/token/
TOKEN = "token"  # API tokens


def client_ip(request: HttpRequest | None) -> str:
    if request is None:
        return "-"
    meta = request.META
    header = settings.BDRE_CLIENT_IP_HEADER
    if header:
        forwarded: str = meta.get("HTTP_" + header.upper().replace("-", "_"), "")
        # The proxy appends the address it saw; earlier entries are whatever the client sent.
        last = forwarded.split(",")[-1].strip()
        if last:
            return last
    return meta.get("REMOTE_ADDR") or "-"


def _keys(kind: str, username: str | None, ip: str) -> list[tuple[str, int]]:
    keys = []
    if username:
        # Hashed: a user name may hold characters a cache backend refuses in keys.
        digest = hashlib.sha256(username.lower().encode()).hexdigest()[:32]
        keys.append((f"bdre:fail:{kind}:user:{digest}", settings.BDRE_LOGIN_MAX_FAILURES_USER))
    limit = (
        settings.BDRE_LOGIN_MAX_FAILURES_IP
        if kind == LOGIN
        else (settings.BDRE_TOKEN_MAX_FAILURES_IP)
    )
    keys.append((f"bdre:fail:{kind}:ip:{ip}", limit))
    return keys


def locked_for(kind: str, username: str | None, ip: str) -> int:
    """Seconds left of a lockout of this user name or address, 0 when there is none."""
    now = time.time()
    left = 0.0
    for key, _ in _keys(kind, username, ip):
        until = cache.get(key + ":locked")
        if until:
            left = max(left, until - now)
    return math.ceil(left) if left > 0 else 0


def record_failure(kind: str, username: str | None, ip: str, reason: str) -> None:
    log.warning("authentication failed: %s user=%s ip=%s reason=%s", kind, username, ip, reason)
    window = settings.BDRE_LOGIN_WINDOW_SECONDS
    lockout = settings.BDRE_LOGIN_LOCKOUT_SECONDS
    for key, limit in _keys(kind, username, ip):
        cache.add(key, 0, window)  # the window starts at the first failure
        try:
            count = cache.incr(key)
        except ValueError:  # the window ended between add and incr
            cache.set(key, 1, window)
            count = 1
        if count >= limit:
            cache.set(key + ":locked", time.time() + lockout, lockout)
            cache.delete(key)
            who = f"user={username}" if ":user:" in key else f"ip={ip}"
            log.warning("locked out for %ss: %s %s", lockout, kind, who)


def record_success(kind: str, username: str) -> None:
    """A right password ends the count of its user name (not of its address: one address may
    be guessing many names)."""
    for key, _ in _keys(kind, username, "-")[:1]:
        cache.delete(key)


def refusal(seconds: int) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return (
        "Too many failed log-ins for this user name or from this address: try again in "
        f"{minutes} minute{'s' if minutes != 1 else ''}."
    )


@receiver(user_login_failed)
def _login_failed(
    sender: object,
    credentials: dict[str, Any],
    request: HttpRequest | None = None,
    **kwargs: Any,
) -> None:
    # Django sends this for every authenticate() that fails, whichever form or view called
    # it; credentials has the password already masked, and only the user name is read.
    record_failure(LOGIN, credentials.get("username"), client_ip(request), "wrong credentials")
