"""Model fields that encrypt their value at rest with Fernet (AES-128-CBC + HMAC-SHA256)."""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

_PREFIX = "fernet:"


@lru_cache(maxsize=4)
def _fernet(keys: str) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key.strip()) for key in keys.split(",") if key.strip()])
    except ValueError as exc:
        raise ImproperlyConfigured(
            "FIELD_ENCRYPTION_KEY must be one or more comma-separated url-safe base64 Fernet "
            "keys of 32 bytes"
        ) from exc


def fernet() -> MultiFernet:
    return _fernet(settings.FIELD_ENCRYPTION_KEY)


def encrypt(value: str) -> str:
    return _PREFIX + fernet().encrypt(value.encode()).decode()


def decrypt(stored: str) -> str:
    if not stored.startswith(_PREFIX):
        raise ValueError("stored value is not an encrypted BDRE secret")
    try:
        return fernet().decrypt(stored[len(_PREFIX) :].encode()).decode()
    except InvalidToken as exc:
        raise ImproperlyConfigured(
            "A secret in the database cannot be decrypted with FIELD_ENCRYPTION_KEY: the key "
            "was changed without keeping the old one in the list"
        ) from exc


class EncryptedTextField(models.TextField):
    """A text value stored encrypted. The empty string is stored as is (no secret set).

    Encrypted values cannot be searched or compared in SQL; only exact reads make sense.
    """

    description = "Text encrypted at rest"

    def get_prep_value(self, value: object) -> object:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return encrypt(str(value))

    def from_db_value(self, value: str | None, expression: object, connection: object) -> object:
        if value is None or value == "":
            return value
        return decrypt(value)

    def get_lookup(self, lookup_name: str):  # type: ignore[no-untyped-def]
        # Every encryption has a fresh IV, so equality in SQL can never match.
        if lookup_name not in ("isnull",):
            return None
        return super().get_lookup(lookup_name)
