"""Settings come from the environment only, with defaults that need no server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers.django_process import OUR_VARIABLES, ROOT, run_django

GOOD_KEY = "kT1-vYj0nF2mQyZ5vW5Oq0sB3jv9kXbA5J0m2vQ8c3E="


def settings_of(**env: str) -> dict:
    result = run_django(
        """
        from django.conf import settings as s
        db = s.DATABASES["default"]
        print(json.dumps({
            "engine": db["ENGINE"], "name": str(db["NAME"]), "options": db.get("OPTIONS", {}),
            "broker": s.CELERY_BROKER_URL, "broker_options": s.CELERY_BROKER_TRANSPORT_OPTIONS,
            "broker_transport": s.CELERY_BROKER_TRANSPORT,
            "debug": s.DEBUG, "hosts": s.ALLOWED_HOSTS, "spark": s.SPARK_MASTER,
            "warehouse": str(s.BDRE_WAREHOUSE), "var": str(s.VAR_DIR),
            "secret_set": bool(s.SECRET_KEY), "key_set": bool(s.FIELD_ENCRYPTION_KEY),
        }))
        """,
        **env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_defaults_need_no_server(tmp_path):
    s = settings_of()
    var = ROOT / "var"
    assert s["engine"] == "django.db.backends.sqlite3"
    assert s["name"] == str(var / "bdre.sqlite3")
    assert s["options"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in s["options"]["init_command"]
    assert s["broker"] == "filesystem://"
    assert s["broker_transport"] == "bdre.broker:Transport"  # kombu's, made safe
    assert s["broker_options"]["data_folder_in"] == str(var / "celery" / "queue")
    assert s["broker_options"]["data_folder_in"] == s["broker_options"]["data_folder_out"]
    assert s["debug"] is True
    assert "127.0.0.1" in s["hosts"]
    assert s["spark"] == "local[*]"
    assert s["warehouse"] == str(var / "warehouse")
    assert s["secret_set"] and s["key_set"]


def test_every_setting_is_read_from_the_environment(tmp_path):
    s = settings_of(
        DATABASE_URL="postgres://bdre:pw@db.example:5433/meta",
        CELERY_BROKER_URL="redis://cache.example:6379/1",
        SECRET_KEY="s" * 50,
        DEBUG="false",
        ALLOWED_HOSTS="bdre.example.com, api.example.com",
        SPARK_MASTER="spark://master:7077",
        BDRE_WAREHOUSE=str(tmp_path / "lake"),
        FIELD_ENCRYPTION_KEY=GOOD_KEY,
    )
    assert s["engine"] == "django.db.backends.postgresql"
    assert s["name"] == "meta"
    assert s["broker"] == "redis://cache.example:6379/1"
    assert s["broker_options"] == {}
    assert s["broker_transport"] is None  # the URL's
    assert s["debug"] is False
    assert s["hosts"] == ["bdre.example.com", "api.example.com"]
    assert s["spark"] == "spark://master:7077"
    assert s["warehouse"] == str(tmp_path / "lake")


def test_var_dir_moves_the_embedded_defaults(tmp_path):
    s = settings_of(BDRE_VAR_DIR=str(tmp_path))
    assert s["name"] == str(tmp_path / "bdre.sqlite3")
    assert s["warehouse"] == str(tmp_path / "warehouse")
    assert (tmp_path / "celery" / "queue").is_dir()


def test_production_mode_without_encryption_key_fails_at_start_up():
    result = run_django("print('started')", DEBUG="false", SECRET_KEY="s" * 50)
    assert result.returncode != 0
    assert "FIELD_ENCRYPTION_KEY must be set" in result.stderr
    assert "started" not in result.stdout


def test_production_mode_without_secret_key_fails_at_start_up():
    result = run_django("print('started')", DEBUG="false", FIELD_ENCRYPTION_KEY=GOOD_KEY)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_a_malformed_encryption_key_fails_at_start_up():
    result = run_django("print('started')", FIELD_ENCRYPTION_KEY="not-a-key")
    assert result.returncode != 0
    assert "FIELD_ENCRYPTION_KEY must be one or more" in result.stderr


def test_a_malformed_boolean_is_a_clear_error():
    result = run_django("print('started')", DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG must be a boolean" in result.stderr


def test_spark_conf_is_a_json_object_of_spark_options():
    result = run_django(
        "from django.conf import settings as s; print(json.dumps(s.SPARK_CONF))",
        SPARK_CONF='{"spark.cores.max": 2, "spark.eventLog.enabled": true, "spark.x": "1g"}',
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "spark.cores.max": "2",
        "spark.eventLog.enabled": "true",
        "spark.x": "1g",
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("spark.cores.max=2", "SPARK_CONF must be a JSON object of Spark options"),
        ('["spark.cores.max"]', "SPARK_CONF must be a JSON object, got list"),
        ('{"cores": "2"}', "'cores' is not a Spark option"),
        ('{"spark.a": {"b": 1}}', "spark.a must be text or a number"),
    ],
)
def test_a_malformed_spark_conf_is_a_clear_error_at_start_up(value, message):
    result = run_django("print('started')", SPARK_CONF=value)
    assert result.returncode != 0
    assert message in result.stderr
    assert "started" not in result.stdout


@pytest.mark.parametrize("mode", ["IMMEDIATE", "DEFERRED"])
def test_sqlite_writers_wait_instead_of_failing(tmp_path, mode):
    """Four processes increment one counter with read-then-write transactions. With the
    project's IMMEDIATE transactions none fails; DEFERRED ones show why it is needed."""
    db = tmp_path / "contended.sqlite3"
    env = {"DATABASE_URL": f"sqlite:///{db}", "BDRE_VAR_DIR": str(tmp_path)}
    setup = run_django(
        """
        from django.db import connection
        with connection.cursor() as c:
            c.execute("CREATE TABLE counter (n integer)")
            c.execute("INSERT INTO counter VALUES (0)")
            c.execute("PRAGMA journal_mode")
            print(json.dumps(c.fetchone()[0]))
        """,
        **env,
    )
    assert setup.returncode == 0, setup.stderr
    assert json.loads(setup.stdout.strip()) == "wal"
    barrier = tmp_path / "ready"
    barrier.mkdir()
    worker = textwrap.dedent(
        f"""
        import django, json, os, pathlib, sys, time
        django.setup()
        from django.db import connection, transaction, OperationalError
        connection.settings_dict["OPTIONS"]["transaction_mode"] = {mode!r}
        # Start together, so that the four really overlap however long each took to start
        # (a start at a set time was missed on a loaded machine: no overlap, no conflict).
        barrier = pathlib.Path({str(barrier)!r})
        (barrier / str(os.getpid())).touch()
        deadline = time.monotonic() + 60
        while len(list(barrier.iterdir())) < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        errors = 0
        for _ in range(40):
            try:
                with transaction.atomic():
                    with connection.cursor() as c:
                        c.execute("SELECT n FROM counter")
                        n = c.fetchone()[0]
                        time.sleep(0.005)
                        c.execute("UPDATE counter SET n = %s", [n + 1])
            except OperationalError:
                errors += 1
        print(errors)
        """
    )
    clean = {k: v for k, v in os.environ.items() if k not in OUR_VARIABLES}
    clean.update(env, DJANGO_SETTINGS_MODULE="bdre.settings")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", worker], cwd=ROOT, env=clean, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    errors = sum(int(p.communicate(timeout=120)[0].strip()) for p in procs)
    check = run_django(
        """
        from django.db import connection
        with connection.cursor() as c:
            c.execute("SELECT n FROM counter")
            print(c.fetchone()[0])
        """,
        **env,
    )
    total = int(check.stdout.strip())
    assert total + errors == 160
    if mode == "IMMEDIATE":
        assert errors == 0
        assert total == 160
    else:
        assert errors > 0
