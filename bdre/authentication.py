"""Token authentication that refuses malformed keys before they reach the database: a key
holding a NUL character made PostgreSQL raise (a 500) on the token lookup."""

from __future__ import annotations

import re

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

_KEY = re.compile(r"[0-9a-f]{40}")


class SafeTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str):
        if not _KEY.fullmatch(key):
            raise exceptions.AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(key)
