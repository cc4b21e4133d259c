"""DRF throttles whose rates are the BDRE_THROTTLE_* settings, read on each request (DRF's
own read theirs once, at import), and whose address is the one bdre.security uses."""

from __future__ import annotations

from django.conf import settings
from rest_framework import throttling

from bdre import security


class _SettingRate:
    setting = ""

    def get_rate(self) -> str:
        return getattr(settings, self.setting)

    def get_ident(self, request) -> str:
        return security.client_ip(request)


class AnonThrottle(_SettingRate, throttling.AnonRateThrottle):
    setting = "BDRE_THROTTLE_ANON"


class UserThrottle(_SettingRate, throttling.UserRateThrottle):
    setting = "BDRE_THROTTLE_USER"


class TokenIssueThrottle(_SettingRate, throttling.SimpleRateThrottle):
    """Issuing tokens by password, by address, whoever is logged in."""

    scope = "token-issue"
    setting = "BDRE_THROTTLE_TOKEN_ISSUE"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
