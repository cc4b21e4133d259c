"""A statement nested too deeply for sqlglot is a 400 everywhere a team's
SQL comes in (the properties API, the job pages, an import), with the one message of
``bdre.sql_parse``, never a ``RecursionError`` and a 500. (The lineage API's answer:
tests/lineage/test_api.py.)"""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from bdre import sql_parse
from processes.models import Process, Property
from processes.step_kinds.sql_guard import check_query
from tests.helpers.api import api_as
from tests.helpers.jobs import build_job, sql_document, sql_form, sql_step
from tests.helpers.pages import as_shown, section, step_index

pytestmark = pytest.mark.django_db

# The attack as written: fifty nested parentheses.
NESTED = "SELECT " + "(" * 50 + "1" + ")" * 50
FLAT = "SELECT 1 AS a"


def pipeline(team, query: str) -> dict:
    return sql_document(team.application.name, query, "lake.out")


# --- the parser -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        NESTED,
        "SELECT " + "abs(" * 50 + "1" + ")" * 50,
        "SELECT " + "NOT " * 300 + "true",
        "SELECT " + "CASE WHEN true THEN " * 50 + "1" + " END" * 50,
        "SELECT 1 AS a FROM t WHERE " + "(" * 1000 + "1 = 1" + ")" * 1000,
        "SELECT transform(array(1), " + "x -> " * 300 + "1) AS a",
    ],
)
def test_a_statement_nested_too_deeply_is_one_error_with_one_message(statement):
    with pytest.raises(sql_parse.StatementTooDeep) as refused:
        sql_parse.parse(statement, "spark")
    assert str(refused.value) == sql_parse.TOO_DEEP


def test_nesting_within_the_limit_parses_and_quoted_parentheses_do_not_count():
    levels = sql_parse.MAX_NESTING
    (tree,) = sql_parse.parse("SELECT " + "(" * levels + "1" + ")" * levels + " AS a", "spark")
    assert tree.key == "select"
    quoted = "SELECT '" + "(" * 100 + "' AS a -- " + "(" * 100 + "\nFROM t"
    assert sql_parse.nesting(quoted, "spark") == 0
    assert sql_parse.parse(quoted, "spark")


@pytest.mark.parametrize(
    "statement", [NESTED, "SELECT transform(array(1), " + "x -> " * 300 + "1)"]
)
def test_the_sandbox_check_refuses_a_statement_nested_too_deeply_with_the_message(statement):
    with pytest.raises(sql_parse.StatementTooDeep, match="nested too deeply"):
        check_query(statement)


def test_lambdas_side_by_side_are_no_nesting():
    statement = "SELECT " + ", ".join(
        f"transform(array(1), x -> x + {i}) AS c{i}" for i in range(60)
    )
    one = "SELECT transform(array(1), x -> x + 0) AS c0"
    assert sql_parse.nesting(statement, "spark") == sql_parse.nesting(one, "spark") == 3


# --- the API: a 400 on the property ---------------------------------------------------------


def test_patching_a_query_to_fifty_nested_parentheses_is_a_400_saying_what_to_fix(team):
    job = build_job(team, "report", [sql_step("report_sql", FLAT)])
    prop = Property.objects.get(process__parent=job, key="query")
    response = api_as(team.developer).patch(
        f"/api/v1/properties/{prop.pk}/", {"value": NESTED}, format="json"
    )
    assert response.status_code == 400, response.content
    assert sql_parse.TOO_DEEP in response.json()["value"][0]
    prop.refresh_from_db()
    assert prop.value == FLAT


def test_posting_a_query_of_fifty_nested_parentheses_is_a_400_saying_what_to_fix(team):
    step = build_job(team, "report", [sql_step("report_sql", FLAT)]).steps.get()
    Property.objects.filter(process=step, key="query").delete()
    response = api_as(team.developer).post(
        "/api/v1/properties/",
        {"process": step.pk, "config_group": "sql", "key": "query", "value": NESTED},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert sql_parse.TOO_DEEP in response.json()["value"][0]
    assert not Property.objects.filter(process=step, key="query").exists()


@pytest.mark.parametrize("endpoint", ["pipeline", "import"])
def test_registering_or_importing_a_job_with_a_nested_query_is_a_400(team, endpoint):
    response = api_as(team.developer).post(
        f"/api/v1/processes/{endpoint}/", pipeline(team, NESTED), format="json"
    )
    assert response.status_code == 400, response.content
    assert sql_parse.TOO_DEEP in response.content.decode()
    assert not Process.objects.filter(name__startswith="report").exists()


def test_the_import_command_refuses_a_nested_query_saying_what_to_fix(team, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(pipeline(team, NESTED)))
    with pytest.raises(CommandError) as refused:
        call_command("import_job", str(path), "--team", team.group.name)
    assert sql_parse.TOO_DEEP in str(refused.value)
    assert not Process.objects.filter(name__startswith="report").exists()


# --- the pages: said on the step's field ----------------------------------------------------


def test_the_new_job_page_says_a_nested_query_is_too_deep_on_the_step(team):
    client = Client()
    client.force_login(team.developer)
    data = sql_form(team.application.pk, f"sql.query = {NESTED}")
    answer = client.post("/jobs/new/", data)
    assert answer.status_code == 200
    assert sql_parse.TOO_DEEP in " ".join(answer.context["steps"].forms[0].errors["properties"])
    assert not Process.objects.filter(name="report").exists()


def test_the_edit_page_says_a_nested_query_is_too_deep_on_the_step_and_saves_nothing(team):
    job = build_job(team, "report", [sql_step("report_sql", FLAT)])
    client = Client()
    client.force_login(team.developer)
    data = as_shown(client, job)
    data[f"step-{step_index(data, job, 'report_sql')}-properties"] = f"sql.query = {NESTED}"
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200
    assert "nested too deeply" in section(answer.content.decode(), "report_sql")
    assert Property.objects.get(process__parent=job, key="query").value == FLAT
