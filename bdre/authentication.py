"""API token authentication: keys are looked up by digest (bdre.models.ApiToken), expired
keys are refused with a 401 that says so, and an address that keeps sending unknown keys is
refused for a while (bdre/security.py)."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from bdre import security
from bdre.models import ApiToken

# Refused before the database: a key holding a NUL character made PostgreSQL raise (a 500).
_KEY = re.compile(r"[0-9a-f]{40}")
# How stale last_used_at may get: one write a minute per token, not one a request.
_TOUCH = timedelta(minutes=1)


class SafeTokenAuthentication(TokenAuthentication):
    model = ApiToken

    def authenticate(self, request):
        self._ip = security.client_ip(request)
        return super().authenticate(request)

    def authenticate_credentials(self, key: str):
        ip = getattr(self, "_ip", "-")
        wait = security.locked_for(security.TOKEN, None, ip)
        if wait:
            security.log.warning("authentication refused: token ip=%s reason=locked out", ip)
            raise exceptions.Throttled(
                wait, detail="Too many failed token authentications from this address."
            )
        token = ApiToken.objects.find(key) if _KEY.fullmatch(key) else None
        if token is None:
            security.record_failure(security.TOKEN, None, ip, "unknown or malformed token")
            raise exceptions.AuthenticationFailed("Invalid token.")
        user = token.user
        if token.expired:
            # Not counted as guessing: the key was real, and an old script would lock out
            # everybody behind its address.
            security.log.warning(
                "authentication failed: token user=%s ip=%s reason=token %s expired",
                user.get_username(),
                ip,
                token.pk,
            )
            raise exceptions.AuthenticationFailed(
                "Token expired: create a new one (API tokens page or /api/v1/tokens/)."
            )
        if not user.is_active:
            security.log.warning(
                "authentication failed: token user=%s ip=%s reason=user inactive",
                user.get_username(),
                ip,
            )
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > _TOUCH:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return user, token
