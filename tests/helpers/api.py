"""The REST API as the tests call it: a token-authenticated client per user, its calls and
its errors."""

from __future__ import annotations

from rest_framework.test import APIClient

from batches.locations import team_landing
from bdre.models import ApiToken


def api_as(user) -> APIClient:
    client = APIClient()
    _, key = ApiToken.issue(user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def post(client, path, body=None):
    """POST ``body`` as JSON to ``/api/v1/<path>``."""
    return client.post(f"/api/v1/{path}", body or {}, format="json")


def register(client, job, name, **extra):
    """Register the file ``name`` of ``job``'s team landing folder as ``job``'s output."""
    body = {
        "source_process_id": job.pk,
        "path": str(team_landing(job.bus_domain.team_id) / name),
        "file_size": 10,
        "file_hash": name,
        "creation_ts": "2026-11-20T10:00:00Z",
        **extra,
    }
    return post(client, "files/register/", body)


def error(response) -> tuple[int, int]:
    """The status and the BDRE error code of an error answer (``{"code", "message"}``)."""
    body = response.json()
    assert set(body) == {"code", "message"}, body
    assert body["message"]
    return response.status_code, body["code"]
