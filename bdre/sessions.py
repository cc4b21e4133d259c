"""Database sessions that refuse malformed keys before they reach the database: a cookie
holding a NUL character made PostgreSQL raise (a 500) on the session lookup."""

from __future__ import annotations

from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

_KEY_CHARS = frozenset(VALID_KEY_CHARS)


class SessionStore(DatabaseSessionStore):
    def _validate_session_key(self, key: str | None) -> bool:
        if not key:
            return False
        # django-stubs omit SessionBase._validate_session_key, a private method Django has.
        return super()._validate_session_key(key) and set(key) <= _KEY_CHARS  # type: ignore[misc]
