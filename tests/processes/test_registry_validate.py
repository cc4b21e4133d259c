"""Validating a job's SQL against the team's tables before it runs (processes.registry.validate):
every problem at once, with the step and the closest names, and what could not be checked."""

from __future__ import annotations

import pytest

from processes.models import Process, ProcessTypeId, Property
from processes.registry.validate import StepSql, validate_sql
from tests.helpers.api import api_as, post
from tests.helpers.factories import HiveTableFactory, JobFactory, StepFactory
from tests.helpers.jobs import build_job, sql_document, sql_form, sql_step
from tests.helpers.pages import as_shown, client_as, step_index

pytestmark = pytest.mark.django_db

EVENTS = (
    "struct<event_id:string,event:string,collector_tstamp:timestamp,"
    "page:struct<url:string,title:string>>"
)


@pytest.fixture
def events(team):
    return HiveTableFactory(
        bus_domain=team.application, dbname="default", table_name="atomic_events", ddl=EVENTS
    )


def sql_of(query: str, name: str = "daily", output: str = "default.daily") -> StepSql:
    return StepSql(name, "spark.sql", {"sql": {"query": query, "output_table": output}})


def test_the_demos_daily_query_over_its_events_is_valid(team, events):
    found = validate_sql(
        team.group.pk,
        [
            sql_of(
                "SELECT to_date(collector_tstamp) AS day, count(*) AS page_views "
                "FROM atomic_events WHERE event = 'page_view' AND batch_id IN ({batch_ids}) "
                "GROUP BY to_date(collector_tstamp) ORDER BY day"
            )
        ],
    )
    assert found.valid, found.problems
    assert found.checked == ["daily: every table and column it names exists"]


def test_every_wrong_column_is_named_at_once_with_the_closest_names(team, events):
    found = validate_sql(
        team.group.pk,
        [
            sql_of(
                "SELECT to_date(collector_tstmp) AS day, e.evnt, e.page.uri, page.title "
                "FROM atomic_events e WHERE eventt = 'page_view'"
            )
        ],
    )
    assert [(p.step, p.property) for p in found.problems] == [("daily", "sql.query")] * 3 + [
        ("daily", "sql.query")
    ]
    messages = [p.message for p in found.problems]
    assert "collector_tstmp is not a column of e (did you mean collector_tstamp?)" in messages
    assert "e.evnt is not a column of e (did you mean event, event_id?)" in messages
    assert "e.page has no field uri (did you mean url?)" in messages
    assert any(m.startswith("eventt is not a column of e (did you mean event") for m in messages)
    assert found.checked == ["daily: 4 problems"]


def test_a_table_the_team_may_not_read_is_named_with_what_it_may(team, events):
    HiveTableFactory(bus_domain=team.other_application, table_name="secret_orders", ddl=EVENTS)
    found = validate_sql(
        team.group.pk,
        [
            sql_of("SELECT event_id FROM atomic_event"),
            sql_of("SELECT event_id FROM secret_orders", name="peek"),
        ],
    )
    assert [(p.step, p.message) for p in found.problems] == [
        (
            "daily",
            "atomic_event is not a table your team may read (did you mean default.atomic_events?)",
        ),
        ("peek", "secret_orders is not a table your team may read"),
    ]


def test_subqueries_ctes_aliases_lambdas_and_correlation_resolve(team, events):
    query = (
        "WITH pv AS (SELECT event_id AS id, page.url AS url FROM atomic_events) "
        "SELECT p.id, upper(url) AS u, transform(array(1), x -> x + 1) AS xs, "
        "(SELECT count(*) FROM atomic_events a WHERE a.event_id = p.id) AS n "
        "FROM pv p GROUP BY p.id, url HAVING u != ''"
    )
    found = validate_sql(team.group.pk, [sql_of(query)])
    assert found.valid, found.problems
    wrong = validate_sql(
        team.group.pk,
        [sql_of("WITH pv AS (SELECT event_id AS id FROM atomic_events) SELECT p.url FROM pv p")],
    )
    assert [p.message for p in wrong.problems] == ["p.url is not a column of p"]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT event_id FROM atomic_events WHERE event_id IN (SELECT id FROM other)",
        "SELECT event_id FROM atomic_events a WHERE EXISTS (SELECT 1 FROM other o "
        "WHERE o.id = a.event_id)",
        "SELECT id FROM range(10)",
        "SELECT event_id FROM atomic_events JOIN other USING (event_id)",
        "SELECT a.event_id FROM atomic_events a LEFT SEMI JOIN other b ON a.event_id = b.id",
        "WITH c(x, y) AS (SELECT event_id, event FROM atomic_events) SELECT x, y FROM c",
        "WITH Daily AS (SELECT event FROM atomic_events) SELECT EVENT FROM daily",
        "SELECT named_struct('a', 1) AS s, s.a AS a FROM atomic_events",
        "SELECT default.atomic_events.event FROM default.atomic_events",
        "SELECT e, count(*) AS n FROM atomic_events LATERAL VIEW explode(array(event)) t AS e "
        "GROUP BY e",
        "SELECT event, row_number() OVER (PARTITION BY event ORDER BY collector_tstamp) AS r "
        "FROM atomic_events UNION ALL SELECT event, 1 AS r FROM atomic_events",
    ],
)
def test_valid_spark_sql_of_every_shape_has_no_problem(team, events, query):
    HiveTableFactory(
        bus_domain=team.application, table_name="other", ddl="struct<id:string,event_id:string>"
    )
    found = validate_sql(team.group.pk, [sql_of(query)])
    assert found.valid, found.problems


def test_two_sources_of_one_name_are_a_problem(team, events):
    found = validate_sql(
        team.group.pk,
        [sql_of("SELECT x.event FROM atomic_events x JOIN atomic_events x ON x.event = x.event")],
    )
    assert [p.message for p in found.problems] == [
        "x names two sources of the query: give each its own alias"
    ]


def test_a_table_not_written_yet_is_said_unchecked_not_wrong(team, events):
    # The shred writes atomic_events_bad; it has run never: its columns are not known.
    HiveTableFactory(bus_domain=team.application, table_name="atomic_events_bad", ddl="")
    found = validate_sql(team.group.pk, [sql_of("SELECT anything FROM atomic_events_bad")])
    assert found.valid
    assert found.checked == [
        "daily: the statement reads; not checked: the columns of default.atomic_events_bad "
        "(nothing written to it yet)"
    ]


def test_a_table_an_earlier_step_will_write_is_known_by_name(team, events):
    first = sql_of("SELECT event_id FROM atomic_events", name="ids", output="default.ids")
    second = sql_of("SELECT event_id, whatever FROM ids", name="use")
    found = validate_sql(team.group.pk, [first, second])
    assert found.valid, found.problems
    # A registered step of the team writes it: the same.
    job_step = StepFactory(
        parent=JobFactory(bus_domain=team.application), process_type_id=ProcessTypeId.SPARK_SQL
    )
    job_step.properties.create(config_group="sql", key="output_table", value="default.later")
    found = validate_sql(team.group.pk, [sql_of("SELECT x FROM later")])
    assert found.valid, found.problems


def test_a_refused_statement_and_a_missing_one_are_problems(team, events):
    found = validate_sql(
        team.group.pk,
        [sql_of("DROP TABLE atomic_events", name="drop"), sql_of("  ", name="empty")],
    )
    assert [(p.step, p.message.split(":")[0]) for p in found.problems][1] == (
        "empty",
        "no statement",
    )
    assert found.problems[0].step == "drop"


def test_steps_that_run_no_sql_are_not_checked(team):
    assert validate_sql(team.group.pk, [StepSql("scan", "ingest.scan", {})]).checked == []


# --- the pages and the API: the same service, nothing saved -----------------------------------

WRONG = "SELECT to_date(collector_tstmp) AS day FROM atomic_events"
RIGHT = "SELECT to_date(collector_tstamp) AS day FROM atomic_events"


def new_job_form(team, query: str, button: str) -> dict:
    return sql_form(
        team.application.pk,
        f"sql.query = {query}\nsql.output_table = default.report",
        **{button: "1"},
    )


def test_validate_on_the_new_job_page_lists_the_problems_and_registers_nothing(team, events):
    client = client_as(team.developer)
    page = client.post("/jobs/new/", new_job_form(team, WRONG, "validate")).content.decode()
    assert "1 problem in the SQL, checked against your team's tables" in page
    assert (
        "collector_tstmp is not a column of atomic_events (did you mean collector_tstamp?)" in page
    )
    assert "report_sql" in page and "nothing was saved" in page
    assert not Process.objects.filter(name="report").exists()

    page = client.post("/jobs/new/", new_job_form(team, RIGHT, "validate")).content.decode()
    assert "The SQL reads only tables and columns your team has." in page
    assert "report_sql: every table and column it names exists" in page
    assert not Process.objects.filter(name="report").exists()


def test_validate_on_the_edit_page_checks_the_edited_sql_and_saves_nothing(team, events):
    job = build_job(team, "report", [sql_step("report_sql", RIGHT, output="default.report")])
    client = client_as(team.developer)
    data = as_shown(client, job)
    data.pop("save")
    data[f"step-{step_index(data, job, 'report_sql')}-properties"] = f"sql.query = {WRONG}"
    page = client.post(f"/jobs/{job.pk}/edit/", data | {"validate": "1"}).content.decode()
    assert "collector_tstmp is not a column of atomic_events" in page
    assert Property.objects.get(process__parent=job, key="query").value == RIGHT


def test_the_api_validates_a_pipeline_document_for_a_developer_only(team, events):
    document = sql_document(team.application.name, WRONG, "default.report")
    answer = post(api_as(team.developer), "processes/validate/", document)
    assert answer.status_code == 200, answer.json()
    assert answer.json() == {
        "valid": False,
        "problems": [
            {
                "step": "report_sql",
                "property": "sql.query",
                "message": "collector_tstmp is not a column of atomic_events "
                "(did you mean collector_tstamp?)",
            }
        ],
        "checked": ["report_sql: 1 problem"],
    }
    assert not Process.objects.filter(name="report").exists()
    assert post(api_as(team.viewer), "processes/validate/", document).status_code == 403
    # Another team's application is not one it can name.
    assert post(api_as(team.outsider), "processes/validate/", document).status_code == 400
