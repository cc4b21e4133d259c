"""Server secrets are encrypted at rest."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from processes.models import Server
from tests.factories import ServerFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-staple"
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END"


def raw_row(server: Server) -> tuple[str, str]:
    table = Server._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT login_password, ssh_private_key FROM {table} WHERE id = %s", [server.pk]
        )
        return cursor.fetchone()


def test_the_database_row_holds_no_plaintext_secret():
    server = ServerFactory(login_password=PASSWORD, ssh_private_key=KEY)
    password_cell, key_cell = raw_row(server)
    assert PASSWORD not in password_cell
    assert "OPENSSH" not in key_cell and "b3BlbnNzaC1rZXktdjEAAAAA" not in key_cell
    assert password_cell.startswith("fernet:")
    assert key_cell.startswith("fernet:")


def test_secrets_read_back_decrypted():
    server = ServerFactory(login_password=PASSWORD, ssh_private_key=KEY)
    fresh = Server.objects.get(pk=server.pk)
    assert fresh.login_password == PASSWORD
    assert fresh.ssh_private_key == KEY


def test_the_same_secret_encrypts_differently_each_time():
    first = ServerFactory(login_password=PASSWORD)
    second = ServerFactory(login_password=PASSWORD)
    assert raw_row(first)[0] != raw_row(second)[0]


def test_an_empty_secret_is_stored_empty():
    server = ServerFactory(login_password="", ssh_private_key="")
    assert raw_row(server) == ("", "")


def test_a_rotated_key_still_reads_old_secrets_and_writes_with_the_new(settings):
    server = ServerFactory(login_password=PASSWORD)
    old_key = settings.FIELD_ENCRYPTION_KEY
    new_key = Fernet.generate_key().decode()
    settings.FIELD_ENCRYPTION_KEY = f"{new_key},{old_key}"
    assert Server.objects.get(pk=server.pk).login_password == PASSWORD
    server.save()
    settings.FIELD_ENCRYPTION_KEY = new_key
    assert Server.objects.get(pk=server.pk).login_password == PASSWORD


def test_a_lost_key_is_a_clear_error(settings):
    server = ServerFactory(login_password=PASSWORD)
    settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()
    with pytest.raises(ImproperlyConfigured, match="cannot be decrypted"):
        Server.objects.get(pk=server.pk)


def test_secrets_cannot_be_searched_in_sql():
    from django.core.exceptions import FieldError

    with pytest.raises(FieldError):
        list(Server.objects.filter(login_password=PASSWORD))
