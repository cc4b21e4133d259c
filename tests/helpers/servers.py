"""Servers whose secrets no key of the installation reads."""

from __future__ import annotations

from cryptography.fernet import Fernet

from processes.models import Server

PASSWORD = "correct-horse-battery-staple"


def lose_key_of(settings, *servers: Server) -> str:
    """Encrypts the servers' secrets with a key that is then dropped from the settings, as a
    row restored from a backup of another installation, or a key removed too early."""
    kept = settings.FIELD_ENCRYPTION_KEY
    settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()
    for server in servers:
        server.login_password = PASSWORD
        server.save()
    settings.FIELD_ENCRYPTION_KEY = kept
    return kept
