"""Server secrets are encrypted at rest."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from rest_framework.test import APIClient

from bdre.fields import UnreadableSecret
from processes.models import Server
from tests.helpers.api import api_as
from tests.helpers.factories import ServerFactory
from tests.helpers.servers import PASSWORD, lose_key_of

pytestmark = pytest.mark.django_db

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


def test_a_secret_no_key_can_read_reads_as_unreadable_not_as_an_error(settings):
    server = ServerFactory(login_password=PASSWORD)
    settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()
    fresh = Server.objects.get(pk=server.pk)
    assert isinstance(fresh.login_password, UnreadableSecret)
    assert PASSWORD not in fresh.login_password
    assert not fresh.secrets_readable


def test_secrets_cannot_be_searched_in_sql():
    from django.core.exceptions import FieldError

    with pytest.raises(FieldError):
        list(Server.objects.filter(login_password=PASSWORD))


# --- a row that no key can read ----------------------------------------------


def test_one_unreadable_row_does_not_break_the_servers_list(settings, team):
    good = ServerFactory(team=team.group, name="good", login_password="fine")
    bad = ServerFactory(team=team.group, name="bad")
    lose_key_of(settings, bad)
    client = api_as(team.viewer)
    answer = client.get("/api/v1/servers/")
    assert answer.status_code == 200
    rows = {row["name"]: row for row in answer.json()["results"]}
    assert rows["good"]["secrets_readable"] is True and rows["good"]["has_password"] is True
    assert rows["bad"]["secrets_readable"] is False
    assert rows["bad"]["has_password"] is True  # one is stored; it must be entered again
    detail = client.get(f"/api/v1/servers/{bad.pk}/")
    assert detail.status_code == 200 and detail.json()["secrets_readable"] is False
    assert PASSWORD not in answer.content.decode() + detail.content.decode()
    assert "fernet:" not in answer.content.decode() + detail.content.decode()
    assert good.pk  # the rest of the list still reads its secrets
    assert Server.objects.get(pk=good.pk).login_password == "fine"


def test_the_admin_shows_an_unreadable_secret_as_to_be_entered_again(
    client, settings, superuser, team
):
    bad = ServerFactory(team=team.group, name="bad")
    lose_key_of(settings, bad)
    client.force_login(superuser)
    listing = client.get("/admin/processes/server/")
    assert listing.status_code == 200
    assert "unreadable, re-enter it" in listing.content.decode()
    form = client.get(f"/admin/processes/server/{bad.pk}/change/")
    assert "unreadable, re-enter it" in form.content.decode()


def test_saving_a_server_keeps_its_unreadable_secret_as_it_was(settings, team):
    bad = ServerFactory(team=team.group, name="bad")
    lose_key_of(settings, bad)
    before = raw_row(bad)[0]
    answer = api_as(team.admin).patch(
        f"/api/v1/servers/{bad.pk}/", {"metainfo": "moved"}, format="json"
    )
    assert answer.status_code == 200
    assert raw_row(bad)[0] == before  # still recoverable, should the old key turn up


def test_re_entering_the_secret_makes_the_row_readable_again(settings, team):
    bad = ServerFactory(team=team.group, name="bad")
    lose_key_of(settings, bad)
    answer = api_as(team.admin).patch(
        f"/api/v1/servers/{bad.pk}/", {"login_password": "new-one"}, format="json"
    )
    assert answer.status_code == 200 and answer.json()["secrets_readable"] is True
    assert Server.objects.get(pk=bad.pk).login_password == "new-one"


# --- rotate_keys ------------------------------------------------------------------------


def test_rotate_keys_re_encrypts_every_secret_with_the_first_key(settings, capsys):
    old_key = settings.FIELD_ENCRYPTION_KEY
    servers = [ServerFactory(login_password=PASSWORD, ssh_private_key=KEY) for _ in range(3)]
    ServerFactory(login_password="", ssh_private_key="")
    new_key = Fernet.generate_key().decode()
    settings.FIELD_ENCRYPTION_KEY = f"{new_key},{old_key}"
    call_command("rotate_keys")
    assert "re-encrypted 6 secrets" in capsys.readouterr().out
    settings.FIELD_ENCRYPTION_KEY = new_key  # the old key can go now
    for server in servers:
        fresh = Server.objects.get(pk=server.pk)
        assert (fresh.login_password, fresh.ssh_private_key) == (PASSWORD, KEY)
        assert fresh.secrets_readable


def test_rotate_keys_reports_rows_no_key_reads_and_rotates_the_others(settings, capsys):
    old_key = settings.FIELD_ENCRYPTION_KEY
    good = ServerFactory(login_password=PASSWORD)
    bad = ServerFactory(name="lost")
    lose_key_of(settings, bad)
    stuck = raw_row(bad)[0]
    new_key = Fernet.generate_key().decode()
    settings.FIELD_ENCRYPTION_KEY = f"{new_key},{old_key}"
    with pytest.raises(CommandError, match=rf"processes.Server {bad.pk} login_password"):
        call_command("rotate_keys")
    assert "re-encrypted 1 secret" in capsys.readouterr().out
    assert raw_row(bad)[0] == stuck  # left alone
    settings.FIELD_ENCRYPTION_KEY = new_key
    assert Server.objects.get(pk=good.pk).login_password == PASSWORD


def test_rotate_keys_with_nothing_to_do_says_so(db, capsys):
    call_command("rotate_keys")
    assert "re-encrypted 0 secrets" in capsys.readouterr().out


def test_an_anonymous_client_reads_no_server(db):
    assert APIClient().get("/api/v1/servers/").status_code == 401
