"""REST clients for the tests: a token-authenticated client per user."""

from __future__ import annotations

from rest_framework.test import APIClient

from bdre.models import ApiToken


def api_as(user) -> APIClient:
    client = APIClient()
    _, key = ApiToken.issue(user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client
