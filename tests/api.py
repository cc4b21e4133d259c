"""REST clients for the tests: a token-authenticated client per user."""

from __future__ import annotations

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def api_as(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
