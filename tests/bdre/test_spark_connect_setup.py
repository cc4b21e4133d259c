"""``manage.py spark_connect_server`` starts a Spark Connect server only with a token
(SPARK_CONNECT_TOKEN), which it gives to the server's JVM in its environment and never on the
command line it runs or prints (docs/operations.md, "Spark Connect as the cluster's front")."""

from __future__ import annotations

import io
import os

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


def test_the_server_does_not_start_without_a_token(settings, monkeypatch):
    settings.SPARK_CONNECT_TOKEN = ""
    monkeypatch.setattr(os, "execvpe", lambda *a: pytest.fail("the server started"))
    with pytest.raises(CommandError, match="SPARK_CONNECT_TOKEN is not set"):
        call_command("spark_connect_server", stdout=io.StringIO())


def test_the_server_gets_the_token_in_its_environment_alone(settings, monkeypatch):
    settings.SPARK_CONNECT_TOKEN = "tok-51c2"
    monkeypatch.setenv("SECRET_KEY", "the-installations-secret")
    monkeypatch.setenv("SPARK_CONNECT_TOKEN", "tok-51c2")
    started = []
    monkeypatch.setattr(os, "execvpe", lambda file, argv, env: started.append((argv, env)))
    call_command("spark_connect_server", stdout=io.StringIO())
    ((argv, env),) = started
    assert env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == "tok-51c2"
    assert "SPARK_CONNECT_TOKEN" not in env and "SECRET_KEY" not in env
    assert not [arg for arg in argv if "tok-51c2" in arg]
    printed = io.StringIO()
    call_command("spark_connect_server", "--print", stdout=printed)
    assert "tok-51c2" not in printed.getvalue()
