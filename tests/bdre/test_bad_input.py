"""Bad input to the API is a 4xx that says what to fix: never a 500, never the database's own
words. Bodies nested too deeply, NUL characters, numbers past what a column holds, and an
unexpected error answered as JSON."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from processes import schedules
from processes.models import Process, Property
from tests.helpers.api import api_as
from tests.helpers.factories import JobFactory, StepFactory
from tests.helpers.jobs import CALL, JOB_TYPE
from tests.helpers.lifecycle import landed

pytestmark = pytest.mark.django_db


def pipeline(name="orders", **properties):
    return {
        "name": name,
        "application": "web",
        "process_type": JOB_TYPE,
        "properties": properties,
        "steps": [{"name": f"{name}_load", "process_type": CALL}],
    }


def post_json(client, url: str, text: str):
    return client.generic("POST", url, text, content_type="application/json")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [40, 100_000])
def test_a_json_body_nested_deeper_than_the_limit_is_a_400(team, depth):
    answer = post_json(api_as(team.developer), "/api/v1/processes/pipeline/", nested(depth))
    assert answer.status_code == 400
    assert answer.json() == {
        "detail": "The JSON body is nested deeper than 32 levels; no BDRE document is: flatten it."
    }


@pytest.mark.parametrize("depth", [40, 100_000])
def test_a_property_value_nested_deeper_than_the_limit_is_a_400(team, depth):
    body = json.dumps(pipeline(alerts={"email": "PLACE"})).replace('"PLACE"', nested(depth))
    answer = post_json(api_as(team.developer), "/api/v1/processes/pipeline/", body)
    assert answer.status_code == 400
    assert "nested deeper than 32 levels" in answer.json()["detail"]
    assert not Process.objects.filter(name="orders").exists()


def test_a_body_as_deep_as_the_limit_is_read(team):
    answer = post_json(api_as(team.developer), "/api/v1/processes/pipeline/", nested(32))
    assert answer.status_code == 400
    assert "nested" not in json.dumps(answer.json())  # read, then refused as not a document


def test_the_token_endpoint_holds_bodies_to_the_same_limit(team):
    answer = post_json(api_as(team.developer), "/api/v1/auth/token/", nested(100_000))
    assert answer.status_code == 400
    assert "nested deeper" in answer.json()["detail"]


def test_a_property_key_with_a_nul_character_is_a_400(team):
    answer = api_as(team.developer).post(
        "/api/v1/processes/pipeline/", pipeline(alerts={"e\x00mail": "ops@example.com"}), "json"
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "detail": "The key of an object at properties.alerts holds a NUL character (\\u0000), "
        "which cannot be stored: remove it."
    }
    assert not Process.objects.filter(name="orders").exists()


def test_a_property_value_with_a_nul_character_is_a_400(team):
    answer = api_as(team.developer).post(
        "/api/v1/processes/pipeline/", pipeline(alerts={"email": "ops\x00"}), "json"
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "detail": "The value at properties.alerts.email holds a NUL character (\\u0000), "
        "which cannot be stored: remove it."
    }
    assert not Process.objects.filter(name="orders").exists()


def test_a_nul_character_in_a_property_of_a_process_is_a_400(team):
    job = JobFactory(bus_domain=team.application)
    answer = api_as(team.developer).post(
        "/api/v1/properties/",
        {"process": job.pk, "config_group": "g", "key": "k", "value": "a\x00b"},
        "json",
    )
    assert answer.status_code == 400
    assert "The value at value holds a NUL character" in answer.json()["detail"]
    assert not Property.objects.filter(process=job).exists()


def test_a_nul_character_in_a_form_body_is_a_400(team):
    job = JobFactory(bus_domain=team.application)
    answer = api_as(team.developer).post(
        "/api/v1/properties/", {"process": job.pk, "config_group": "g\x00", "key": "k"}
    )
    assert answer.status_code == 400
    assert "value at config_group holds a NUL character" in answer.json()["detail"]


@pytest.mark.postgres
def test_a_property_key_with_a_nul_character_is_a_400_on_postgresql(team):
    # PostgreSQL refuses NUL in text (psycopg2 raises before the query is sent): this was a
    # 500 there, and stored on SQLite.
    if connection.vendor != "postgresql":
        pytest.skip("needs DATABASE_URL=postgres://...")
    answer = api_as(team.developer).post(
        "/api/v1/processes/pipeline/", pipeline(alerts={"e\x00mail": "x"}), "json"
    )
    assert answer.status_code == 400
    assert "NUL character" in answer.json()["detail"]


def test_a_property_group_longer_than_its_column_is_a_400_on_its_field(team):
    answer = api_as(team.developer).post(
        "/api/v1/processes/pipeline/", pipeline(**{"g" * 65: {"k": "v"}}), "json"
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "properties": [
            "orders: a config group has at most 64 characters; gggggggggggggggggggg... has 65."
        ]
    }


def test_a_number_too_large_for_the_database_is_a_400_without_the_database_s_words(team):
    job = StepFactory(parent=JobFactory(bus_domain=team.application)).parent
    answer = api_as(team.developer).post(
        "/api/v1/files/register/",
        {
            "source_process_id": job.pk,
            "path": landed(job, "orders.tsv"),
            "file_size": 10**30,
            "file_hash": "h",
            "creation_ts": "2026-11-20T10:00:00Z",
        },
        "json",
    )
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert detail.startswith("A value is too large: ids and counts are whole numbers")
    for word in ("SQLite", "INTEGER", "psycopg", "bigint", "out of range for"):
        assert word not in detail


def test_pausing_a_job_that_runs_on_its_upstream_holds_it_and_an_unknown_job_is_a_404(team):
    job = JobFactory(bus_domain=team.application, name="sessions")
    schedules.set_schedule(job.pk, schedules.Schedule(on_upstream=True))
    api = api_as(team.developer)
    answer = api.post(f"/api/v1/processes/{job.pk}/pause/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["paused"] is True and answer.json()["on_upstream"] is True
    assert api.post(f"/api/v1/processes/{job.pk}/resume/").json()["paused"] is False
    # An id of no job answers as another team's job does: nothing says which exists.
    unknown = api.post("/api/v1/processes/999999/pause/")
    assert unknown.status_code == 404 and unknown.json()["code"] == 102


def test_an_unexpected_error_in_the_api_is_a_json_500(team, monkeypatch):
    from processes import api

    def broken(self, instance):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(api.ProcessViewSet, "perform_destroy", broken)
    client = api_as(team.admin)
    client.raise_request_exception = False
    step = StepFactory(parent=JobFactory(bus_domain=team.application))
    answer = client.delete(f"/api/v1/processes/{step.pk}/")
    assert answer.status_code == 500
    assert answer.json() == {"detail": "Server error."}


def test_two_templates_whose_steps_share_names_are_both_saved(team):
    # Every template saved from one job has its steps' names: this was a 409 carrying the
    # database's UNIQUE constraint message.
    client = api_as(team.developer)
    for name in ("orders_daily", "orders_hourly"):
        body = {**pipeline(name), "steps": [{"name": "load", "process_type": CALL}]}
        answer = client.post("/api/v1/templates/", body, "json")
        assert answer.status_code == 201, answer.json()
        assert [step["name"] for step in answer.json()["steps"]] == ["load"]


@pytest.mark.parametrize("offset", ["-20:16", "+23:59"])
def test_a_time_whose_offset_postgresql_refuses_filters_in_utc(team, offset):
    # ISO 8601 allows offsets to 23:59, PostgreSQL to 15:59: this was a DataError there,
    # answered with the database's message, and it broke the request's transaction.
    job = JobFactory(bus_domain=team.application)
    answer = api_as(team.viewer).get(
        "/api/v1/processes/", {"added_after": f"2000-01-01T00:00:00{offset}"}
    )
    assert answer.status_code == 200
    assert [row["id"] for row in answer.json()["results"]] == [job.pk]


def test_a_time_outside_the_years_1_to_9999_in_utc_is_a_400_on_its_filter(team):
    answer = api_as(team.viewer).get(
        "/api/v1/processes/", {"added_after": "0001-01-01T00:00:00+01:00"}
    )
    assert answer.status_code == 400
    assert answer.json() == {"added": ["A time from year 1 to 9999 (in UTC)."]}
