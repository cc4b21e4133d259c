"""Accounts and tokens: log-ins and token use are throttled, tokens expire and
their owner lists and revokes them, and every authentication failure is logged without the
secret. Each attack is written as the request an attacker would send."""

from __future__ import annotations

import logging
import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from bdre.models import ApiToken
from tests.helpers.api import api_as
from tests.helpers.factories import TEST_PASSWORD

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


@pytest.fixture
def limits(settings):
    settings.BDRE_LOGIN_MAX_FAILURES_USER = 3
    settings.BDRE_LOGIN_MAX_FAILURES_IP = 6
    settings.BDRE_LOGIN_WINDOW_SECONDS = 600
    settings.BDRE_LOGIN_LOCKOUT_SECONDS = 300
    settings.BDRE_TOKEN_MAX_FAILURES_IP = 4
    return settings


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


def guess(client, username: str, password: str, ip: str = "10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=ip)


# --- the login page ---------------------------------------------------------------------


def test_password_guessing_locks_the_username_out_even_for_the_right_password(client, team, limits):
    for attempt in range(3):
        guess(client, "viewer", f"guess-{attempt}")
    answer = guess(client, "viewer", TEST_PASSWORD)
    assert answer.status_code == 200
    assert "Too many failed log-ins" in answer.content.decode()
    assert not logged_in(client)


def test_guessing_many_usernames_from_one_address_locks_the_address_out(client, team, limits):
    for attempt in range(6):
        guess(client, f"nobody-{attempt}", "x")
    assert "Too many failed log-ins" in guess(client, "viewer", TEST_PASSWORD).content.decode()
    assert not logged_in(client)
    guess(client, "viewer", TEST_PASSWORD, ip="10.0.0.2")
    assert logged_in(client)  # another address, and this user name had no failure


def test_the_lockout_ends_after_its_period(client, team, limits, monkeypatch):
    for attempt in range(3):
        guess(client, "viewer", f"guess-{attempt}")
    later = time.time() + 301
    monkeypatch.setattr(time, "time", lambda: later)
    guess(client, "viewer", TEST_PASSWORD)
    assert logged_in(client)


def test_a_successful_log_in_resets_the_count_of_its_username(client, team, limits):
    for _ in range(2):
        guess(client, "viewer", "wrong")
    guess(client, "viewer", TEST_PASSWORD)
    client.logout()
    for _ in range(2):
        guess(client, "viewer", "wrong")
    guess(client, "viewer", TEST_PASSWORD)
    assert logged_in(client)


def test_the_admin_log_in_is_locked_out_too(client, superuser, limits):
    superuser.set_password(TEST_PASSWORD)
    superuser.save()
    for attempt in range(3):
        client.post("/admin/login/", {"username": "root", "password": f"g{attempt}"})
    answer = client.post("/admin/login/", {"username": "root", "password": TEST_PASSWORD})
    assert "Too many failed log-ins" in answer.content.decode()
    assert not logged_in(client)


def test_a_failed_log_in_is_logged_with_username_and_address_but_never_the_password(
    client, team, limits, caplog
):
    with caplog.at_level(logging.INFO, logger="bdre.security"):
        guess(client, "viewer", "s3cret-guess-1234", ip="192.0.2.7")
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "bdre.security")
    assert "viewer" in text and "192.0.2.7" in text
    assert "s3cret-guess-1234" not in caplog.text


# --- API tokens: throttling -------------------------------------------------------------


def test_token_guessing_is_refused_from_the_address_after_repeated_failures(team, limits):
    valid = api_as(team.developer)
    attacker = APIClient(REMOTE_ADDR="127.0.0.1")
    for attempt in range(4):
        attacker.credentials(HTTP_AUTHORIZATION=f"Token {attempt:040x}")
        assert attacker.get("/api/v1/processes/").status_code == 401
    answer = valid.get("/api/v1/processes/")  # the right key, from the guessing address
    assert answer.status_code == 429
    assert "Too many failed" in answer.json()["detail"]


def test_a_bad_token_is_logged_without_the_token(team, limits, caplog):
    key = "ab" * 20
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    with caplog.at_level(logging.INFO, logger="bdre.security"):
        client.get("/api/v1/processes/")
    assert any(r.name == "bdre.security" for r in caplog.records)
    assert key not in caplog.text and key[:8] not in caplog.text


def test_issuing_tokens_by_password_is_throttled(team, settings):
    settings.BDRE_THROTTLE_TOKEN_ISSUE = "3/minute"
    client = APIClient()
    body = {"username": "developer", "password": TEST_PASSWORD}
    assert [client.post("/api/v1/auth/token/", body).status_code for _ in range(4)] == [
        200,
        200,
        200,
        429,
    ]


def test_password_guessing_through_the_token_endpoint_locks_the_username(team, limits):
    client = APIClient()
    for attempt in range(3):
        client.post("/api/v1/auth/token/", {"username": "developer", "password": f"g{attempt}"})
    answer = client.post(
        "/api/v1/auth/token/", {"username": "developer", "password": TEST_PASSWORD}
    )
    assert answer.status_code == 429
    assert "token" not in answer.json()


def test_api_requests_of_a_user_are_throttled(team, settings):
    settings.BDRE_THROTTLE_USER = "3/minute"
    client = api_as(team.developer)
    codes = [client.get("/api/v1/processes/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]


def test_anonymous_api_requests_are_throttled(db, settings):
    settings.BDRE_THROTTLE_ANON = "2/minute"
    client = APIClient()
    codes = [client.get("/api/schema/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]


# --- API tokens: expiry, listing, revoking ----------------------------------------------


def test_a_token_is_issued_with_the_configured_expiry(team, settings):
    settings.BDRE_TOKEN_DAYS = 30
    answer = APIClient().post(
        "/api/v1/auth/token/", {"username": "developer", "password": TEST_PASSWORD}
    )
    assert answer.status_code == 200
    token = ApiToken.objects.get(user=team.developer)
    left = token.expires_at - timezone.now()
    assert timedelta(days=29) < left <= timedelta(days=30)
    assert ApiToken.objects.find(answer.json()["token"]) == token


def test_an_expired_token_is_refused_with_a_401_saying_it_expired(team, caplog):
    token, key = ApiToken.issue(team.developer)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    with caplog.at_level(logging.INFO, logger="bdre.security"):
        answer = client.get("/api/v1/processes/")
    assert answer.status_code == 401
    assert "expired" in answer.json()["detail"]
    assert "developer" in caplog.text and key not in caplog.text


def test_the_token_key_is_not_stored_in_clear(team):
    token, key = ApiToken.issue(team.developer)
    assert key not in {str(v) for v in ApiToken.objects.filter(pk=token.pk).values().get().values()}


def test_using_a_token_records_when_it_was_last_used(team):
    token, key = ApiToken.issue(team.developer)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/processes/").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_the_owner_creates_lists_and_revokes_tokens_through_the_api(team):
    client = api_as(team.developer)
    created = client.post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert created.status_code == 201
    key = created.json()["key"]
    listed = client.get("/api/v1/tokens/").json()["results"]
    assert {t["name"] for t in listed} >= {"ci"}
    assert all("key" not in t for t in listed)
    assert key not in str(listed)
    ci = next(t for t in listed if t["name"] == "ci")
    assert ci["expires_at"] and ci["created_ts"]
    assert client.delete(f"/api/v1/tokens/{ci['id']}/").status_code == 204
    revoked = APIClient()
    revoked.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert revoked.get("/api/v1/processes/").status_code == 401


def test_nobody_sees_or_revokes_another_users_tokens(team):
    theirs, _ = ApiToken.issue(team.admin, name="admin's")
    client = api_as(team.outsider)
    assert "admin's" not in str(client.get("/api/v1/tokens/").json())
    assert client.get(f"/api/v1/tokens/{theirs.pk}/").status_code == 404
    assert client.delete(f"/api/v1/tokens/{theirs.pk}/").status_code == 404
    assert ApiToken.objects.filter(pk=theirs.pk).exists()


def test_a_token_cannot_be_created_for_longer_than_the_setting(team, settings):
    settings.BDRE_TOKEN_DAYS = 10
    client = api_as(team.developer)
    answer = client.post("/api/v1/tokens/", {"expires_in_days": 11}, format="json")
    assert answer.status_code == 400
    assert client.post("/api/v1/tokens/", {"expires_in_days": 5}, format="json").status_code == 201


# --- the API tokens page ----------------------------------------------------------------


def test_the_header_links_to_the_api_tokens_page(client, team):
    client.force_login(team.viewer)
    assert 'href="/tokens/"' in client.get("/").content.decode()


def test_the_tokens_page_creates_shows_the_key_once_lists_and_revokes(client, team):
    client.force_login(team.viewer)
    created = client.post("/tokens/", {"name": "laptop"})
    assert created.status_code == 200
    html = created.content.decode()
    key = re.search(r"[0-9a-f]{40}", html).group(0)
    token = ApiToken.objects.find(key)
    assert token.user == team.viewer and token.name == "laptop"
    listing = client.get("/tokens/").content.decode()
    assert "laptop" in listing and key not in listing
    confirm = client.get(f"/tokens/{token.pk}/revoke/")
    assert confirm.status_code == 200 and "Revoke" in confirm.content.decode()
    assert ApiToken.objects.filter(pk=token.pk).exists()  # a GET changes nothing
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_another_users_token_cannot_be_revoked_from_the_page(client, team):
    theirs, _ = ApiToken.issue(team.admin)
    client.force_login(team.viewer)
    assert client.post(f"/tokens/{theirs.pk}/revoke/").status_code == 404
    assert ApiToken.objects.filter(pk=theirs.pk).exists()
