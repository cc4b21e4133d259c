"""Servers through REST: their secrets are written but never read, and a developer reads them
but cannot change them."""

from __future__ import annotations

import pytest

from processes.models import Server
from tests.helpers.api import api_as
from tests.helpers.factories import ServerFactory

pytestmark = pytest.mark.django_db


def test_server_secrets_are_written_but_never_read(team):
    admin = api_as(team.admin)
    created = admin.post(
        "/api/v1/servers/",
        {
            "team": team.group.pk,
            "server_type": "sftp",
            "name": "partner",
            "login_user": "etl",
            "login_password": "s3cret-pw",
            "ssh_private_key": "-----BEGIN KEY-----",
        },
        format="json",
    )
    assert created.status_code == 201
    for body in (created.json(), admin.get(f"/api/v1/servers/{created.json()['id']}/").json()):
        assert "login_password" not in body and "ssh_private_key" not in body
        assert body["has_password"] and body["has_ssh_private_key"]
        assert "s3cret" not in str(body)
    stored = Server.objects.get(name="partner")
    assert stored.login_password == "s3cret-pw"  # decrypted by the field, encrypted at rest


def test_a_developer_reads_servers_but_cannot_change_them(team):
    server = ServerFactory(team=team.group)
    dev = api_as(team.developer)
    assert dev.get(f"/api/v1/servers/{server.pk}/").status_code == 200
    response = dev.patch(f"/api/v1/servers/{server.pk}/", {"name": "x"}, format="json")
    assert response.status_code == 403
