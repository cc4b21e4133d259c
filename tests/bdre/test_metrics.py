"""/metrics: who may scrape it (an operator's token or address), and prometheus-client's
multi-process mode adding up what several worker processes observed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from bdre.metrics import clear_dead_processes

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = "203.0.113.7"  # TEST-NET-3: in no allowlist


def samples(body: bytes) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape: (name, labels) -> value."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def scrape(client: Client, **extra: str):
    return client.get("/metrics", **extra)


# --- who may scrape ------------------------------------------------------------------------


@pytest.mark.django_db
def test_localhost_scrapes_prometheus_text_by_default():
    response = scrape(Client())  # the test client comes from 127.0.0.1
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    found = samples(response.content)
    assert found[("bdre_metrics_collector_up", frozenset({("collector", "processes")}))] == 1
    assert found[("bdre_metrics_collector_up", frozenset({("collector", "batches")}))] == 1


@pytest.mark.django_db
def test_an_address_outside_the_allowlist_without_a_token_gets_a_403_saying_why(make_job):
    make_job("secret_pipeline")
    response = scrape(Client(), REMOTE_ADDR=OUTSIDE)
    assert response.status_code == 403
    text = response.content.decode()
    assert "BDRE_METRICS_ALLOW" in text and OUTSIDE in text and "BDRE_METRICS_TOKEN" in text
    assert "secret_pipeline" not in text and "bdre_" not in text


@pytest.mark.django_db
def test_a_signed_in_team_member_from_outside_gets_no_metrics(team, make_job):
    make_job("team_pipeline")
    client = Client()
    client.force_login(team.admin)
    response = scrape(client, REMOTE_ADDR=OUTSIDE)
    assert response.status_code == 403
    assert "team_pipeline" not in response.content.decode()


@pytest.mark.django_db
def test_the_token_opens_it_from_any_address(settings):
    settings.BDRE_METRICS_TOKEN = "scrape-me-please"
    response = scrape(Client(), REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Bearer scrape-me-please")
    assert response.status_code == 200, response.content
    assert b"bdre_metrics_collector_up" in response.content


@pytest.mark.django_db
def test_a_wrong_token_is_refused_even_from_an_allowed_address(settings):
    settings.BDRE_METRICS_TOKEN = "scrape-me-please"
    response = scrape(Client(), HTTP_AUTHORIZATION="Bearer guessed")
    assert response.status_code == 403
    assert "not BDRE_METRICS_TOKEN" in response.content.decode()


@pytest.mark.django_db
def test_a_token_sent_to_a_server_without_one_says_so():
    response = scrape(Client(), REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Bearer anything")
    assert response.status_code == 403
    assert "BDRE_METRICS_TOKEN is not set" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("address", "status"),
    [("10.1.2.3", 200), ("::ffff:10.1.2.3", 200), ("127.0.0.1", 403), ("11.0.0.1", 403)],
)
def test_the_allowlist_is_a_list_of_networks(settings, address, status):
    settings.BDRE_METRICS_ALLOW = ["10.0.0.0/8", "fd00::/8"]
    assert scrape(Client(), REMOTE_ADDR=address).status_code == status


@pytest.mark.django_db
def test_behind_a_proxy_the_forwarded_address_is_checked(settings):
    settings.BDRE_CLIENT_IP_HEADER = "X-Forwarded-For"
    # The proxy runs on the same host: its own address would let everybody in.
    refused = scrape(Client(), HTTP_X_FORWARDED_FOR=OUTSIDE)
    assert refused.status_code == 403
    assert scrape(Client(), HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 200


@pytest.mark.django_db
def test_metrics_cannot_be_posted():
    assert Client().post("/metrics").status_code == 405


def test_a_malformed_allowlist_fails_at_start_up():
    result = _python("import django; django.setup()", BDRE_METRICS_ALLOW="10.0.0.0/8,office")
    assert result.returncode != 0
    assert "BDRE_METRICS_ALLOW: 'office' is not a CIDR" in result.stderr


# --- several processes ---------------------------------------------------------------------

OBSERVE = """
import django
django.setup()
from processes.metrics import observe_step
observe_step(
    {{"team": "ops", "job_name": "nightly", "step_name": "load"}},
    kind="python.callable", state="success", seconds={seconds},
)
"""


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, DJANGO_SETTINGS_MODULE="bdre.settings", **env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db
def test_a_scrape_adds_up_the_step_durations_two_worker_processes_observed(tmp_path, settings):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    for seconds in (3, 50):
        done = _python(OBSERVE.format(seconds=seconds), PROMETHEUS_MULTIPROC_DIR=str(folder))
        assert done.returncode == 0, done.stderr
    assert len(list(folder.glob("histogram_*.db"))) == 2  # one file per process
    settings.PROMETHEUS_MULTIPROC_DIR = str(folder)
    found = samples(scrape(Client()).content)
    labels = {
        ("team", "ops"),
        ("job_name", "nightly"),
        ("step_name", "load"),
        ("kind", "python.callable"),
        ("state", "success"),
    }
    assert found[("bdre_step_run_duration_seconds_count", frozenset(labels))] == 2
    assert found[("bdre_step_run_duration_seconds_sum", frozenset(labels))] == 53
    le = {("le", "5.0")} | labels
    assert found[("bdre_step_run_duration_seconds_bucket", frozenset(le))] == 1


def test_a_worker_start_removes_the_files_of_dead_processes_only(tmp_path):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    done = _python(OBSERVE.format(seconds=1), PROMETHEUS_MULTIPROC_DIR=str(folder))
    assert done.returncode == 0, done.stderr
    (dead,) = folder.glob("histogram_*.db")  # its process has exited
    alive = folder / f"counter_{os.getpid()}.db"
    alive.write_bytes(b"")
    assert clear_dead_processes(str(folder)) == [dead.name]
    assert sorted(p.name for p in folder.iterdir()) == [alive.name]


def test_the_folder_is_under_the_var_dir_by_default_and_in_the_environment():
    unset = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; django.setup(); print(os.environ['PROMETHEUS_MULTIPROC_DIR'])",
        ],
        cwd=ROOT,
        env=dict(unset, DJANGO_SETTINGS_MODULE="bdre.settings", BDRE_VAR_DIR=str(settings.VAR_DIR)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(Path(settings.VAR_DIR) / "prometheus")


def test_an_empty_folder_setting_keeps_each_process_own_numbers(tmp_path):
    result = _python(
        OBSERVE.format(seconds=7)
        + """
import os
from bdre.metrics import exposition
assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
print(exposition().decode())
""",
        PROMETHEUS_MULTIPROC_DIR="",
    )
    assert result.returncode == 0, result.stderr
    found = samples(result.stdout.encode())
    count = [v for (name, _), v in found.items() if name == "bdre_step_run_duration_seconds_count"]
    assert count == [1]
