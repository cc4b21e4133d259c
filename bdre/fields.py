"""Model fields that encrypt their value at rest with Fernet (AES-128-CBC + HMAC-SHA256)."""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models import Lookup

_PREFIX = "fernet:"

logger = logging.getLogger("bdre.security")


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


class UnreadableSecret(str):
    """What a secret reads as when no key of FIELD_ENCRYPTION_KEY decrypts it: empty as text
    (it is never a usable password), true as a truth value (a secret is stored, to be entered
    again), and saved back as the ciphertext it was read from, so that editing another field
    of the row does not destroy what a recovered old key could still read."""

    stored: str

    def __new__(cls, stored: str) -> UnreadableSecret:
        value = super().__new__(cls, "")
        value.stored = stored
        return value

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "<unreadable secret>"


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
        if isinstance(value, UnreadableSecret):
            return value.stored
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return encrypt(str(value))

    def from_db_value(self, value: str | None, expression: object, connection: object) -> object:
        if value is None or value == "":
            return value
        try:
            return decrypt(value)
        except ImproperlyConfigured:
            # One such row must not make every page that lists its table fail.
            logger.warning(
                "A secret of %s cannot be decrypted with any key of FIELD_ENCRYPTION_KEY: it "
                "must be entered again (or the old key put back in the list)",
                self.model._meta.label if hasattr(self, "model") else "a model",
            )
            return UnreadableSecret(value)

    def get_lookup(self, lookup_name: str) -> type[Lookup[Any]] | None:
        # Every encryption has a fresh IV, so equality in SQL can never match.
        if lookup_name not in ("isnull",):
            return None
        return super().get_lookup(lookup_name)


def is_readable(value: object) -> bool:
    return not isinstance(value, UnreadableSecret)


def encrypted_fields() -> list[tuple[type[models.Model], list[str]]]:
    """Every concrete model with encrypted fields, and the names of those fields."""
    from django.apps import apps

    found = []
    for model in apps.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
        if names:
            found.append((model, names))
    return found


def rotate(stored: str) -> str:
    """The ciphertext re-encrypted with the first key; InvalidToken when no key reads it."""
    if not stored.startswith(_PREFIX):
        raise InvalidToken
    return _PREFIX + fernet().rotate(stored[len(_PREFIX) :].encode()).decode()
