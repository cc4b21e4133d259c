"""Every page of the browser UI as each role of the team and as an outsider: members read,
an outsider gets a 404, buttons that change something are offered to developers only and
refused (403) to a viewer who forges the request."""

from __future__ import annotations

import pytest

from batches.models import BatchConsumpQueue, BatchState
from lineage.extract import extract, record
from lineage.models import LineageNode
from processes import lifecycle, schedules
from processes.models import ExecState, InstanceExec
from tests.helpers.factories import LineageQueryFactory, QueueRowFactory
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db

MEMBERS = ("viewer", "developer", "admin")


def pages(job, outcome, node) -> list[str]:
    return [
        f"/jobs/{job.pk}/",
        f"/runs/{outcome.instance_exec_id}/",
        f"/runs/{outcome.instance_exec_id}/live/",
        f"/batches/{outcome.target_batch_id}/",
        f"/lineage/nodes/{node.pk}/",
        f"/lineage/nodes/{node.pk}/?level=column",
    ]


@pytest.fixture
def node(pipeline):
    job, _ = pipeline
    query = LineageQueryFactory(process=job.steps.first())
    record(
        query,
        extract(
            "SELECT a, SUM(b) AS total FROM lake.src GROUP BY a",
            schema={"lake": {"src": {"a": "int", "b": "int"}}},
            target="lake.out",
        ),
    )
    return LineageNode.objects.get(qualified_name="lake.out")


def test_anonymous_users_are_sent_to_the_login_page(client, pipeline):
    for url in ("/", "/queue/", "/lineage/", f"/jobs/{pipeline[0].pk}/"):
        answer = client.get(url)
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("who", MEMBERS)
def test_members_see_every_page_of_their_team(team, pipeline, node, who):
    client = client_as(getattr(team, who))
    for url in [
        "/",
        "/queue/",
        "/queue/?table=archive",
        "/batches/",
        "/lineage/?q=out",
        *pages(*pipeline, node),
    ]:
        answer = client.get(url)
        assert answer.status_code == 200, url


def test_an_outsider_finds_nothing_of_the_team(team, pipeline, node):
    client = client_as(team.outsider)
    for url in pages(*pipeline, node):
        assert client.get(url).status_code == 404, url
    dashboard = client.get("/").content.decode()
    assert "clicks" not in dashboard and "No job in your teams yet." in dashboard
    assert "lake.out" not in client.get("/lineage/?q=lake").content.decode()
    assert "clicks" not in client.get("/queue/?table=archive").content.decode()


def test_every_page_has_the_apps_icon_and_favicon_ico_leads_to_it(client, team, pipeline):
    page = client_as(team.viewer).get("/").content.decode()
    assert '<link rel="icon" href="/static/bdre/favicon.svg" type="image/svg+xml">' in page
    answer = client.get("/favicon.ico")  # asked for by browsers whatever a page links to
    assert answer.status_code == 302 and answer["Location"] == "/static/bdre/favicon.svg"
    assert client.get(answer["Location"]).status_code == 200


def test_the_dashboard_shows_each_job_with_its_last_run_and_charts(team, pipeline):
    job, outcome = pipeline
    page = client_as(team.viewer).get("/").content.decode()
    assert f'href="/jobs/{job.pk}/"' in page
    assert f'href="/runs/{outcome.instance_exec_id}/"' in page and "SUCCESS" in page
    assert page.count("<svg") == 2  # runs per hour, queue depth
    assert "0\xa0minutes" not in page and ">just now</time>" in page  # its run just ended


def test_the_job_page_draws_the_workflow_coloured_by_the_last_run(team, pipeline):
    job, _ = pipeline
    page = client_as(team.viewer).get(f"/jobs/{job.pk}/").content.decode()
    assert "Workflow of clicks" in page
    assert page.count('data-state="SUCCESS"') == 2
    assert "tests.processes.callables.sleep" in page  # the properties, by config group


def test_run_now_and_terminate_are_offered_to_developers_only(team, pipeline):
    job, _ = pipeline
    assert "Run now" not in client_as(team.viewer).get(f"/jobs/{job.pk}/").content.decode()
    assert "Run now" in client_as(team.developer).get(f"/jobs/{job.pk}/").content.decode()


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_a_forged_run_now_is_refused(team, pipeline, sent, who, status):
    job, _ = pipeline
    assert client_as(getattr(team, who)).post(f"/jobs/{job.pk}/run/").status_code == status
    assert sent == []


def test_a_developer_runs_a_job_now(team, pipeline, sent, django_capture_on_commit_callbacks):
    job, _ = pipeline
    with django_capture_on_commit_callbacks(execute=True):
        answer = client_as(team.developer).post(f"/jobs/{job.pk}/run/", follow=True)
    run = InstanceExec.objects.filter(process=job).latest("id")
    assert [args for args, _ in sent] == [(run.pk, step.pk) for step in job.steps.all()][:1]
    assert answer.redirect_chain == [(f"/runs/{run.pk}/", 302)]  # the run it started opens
    assert (
        f"Run {run.pk} of clicks started: its first steps are queued now for the workers of "
        "the celery queue."
    ) in answer.content.decode()


def test_a_paused_job_is_run_now_only_after_a_second_confirmation(team, pipeline, sent):
    job, _ = pipeline
    schedules.set_schedule(job.pk, schedules.Schedule(every_seconds=3600))
    schedules.pause(job.pk)
    client = client_as(team.developer)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "This job is paused: run it anyway?" in page and "Run anyway" in page
    runs = InstanceExec.objects.filter(process=job).count()
    refused = client.post(f"/jobs/{job.pk}/run/", follow=True).content.decode()
    assert "(error 116)" in refused
    assert InstanceExec.objects.filter(process=job).count() == runs
    forced = client.post(f"/jobs/{job.pk}/run/", {"force": "yes"}, follow=True)
    assert InstanceExec.objects.filter(process=job).count() == runs + 1
    assert "started" in forced.content.decode()


def test_running_a_job_that_is_running_says_so(team, pipeline, sent):
    job, _ = pipeline
    lifecycle.init_job(job.pk, 1)
    answer = client_as(team.developer).post(f"/jobs/{job.pk}/run/", follow=True)
    assert "(error 104)" in answer.content.decode()
    assert sent == []


def test_terminating_a_job_that_does_not_run_says_so(team, pipeline):
    job, _ = pipeline
    answer = client_as(team.developer).post(f"/jobs/{job.pk}/terminate/", follow=True)
    assert "error 1" in answer.content.decode()  # a BdreError code, shown as a message
    assert InstanceExec.objects.filter(exec_state_id=ExecState.FAILED).count() == 0


def test_the_run_page_refreshes_only_while_the_run_is_going(team, pipeline):
    _job, outcome = pipeline
    client = client_as(team.viewer)
    finished = client.get(f"/runs/{outcome.instance_exec_id}/").content.decode()
    assert "data-refresh" not in finished and "live.js" not in finished
    assert "load" in finished and "report" in finished and "slept" in finished  # counters
    InstanceExec.objects.filter(pk=outcome.instance_exec_id).update(
        exec_state_id=ExecState.RUNNING, end_ts=None
    )
    running = client.get(f"/runs/{outcome.instance_exec_id}/").content.decode()
    assert f'data-refresh="/runs/{outcome.instance_exec_id}/live/"' in running
    assert "live.js" in running


@pytest.fixture
def dead_letter(team, pipeline):
    job, _ = pipeline
    step = job.steps.order_by("id").first()
    return QueueRowFactory(process=step, batch_state_id=BatchState.DISCARDED, attempts=3)


def test_the_queue_filters_by_state_and_offers_requeue_to_developers(team, dead_letter):
    dev = client_as(team.developer).get("/queue/", {"batch_state": BatchState.DISCARDED})
    assert f"/queue/{dead_letter.pk}/requeue/" in dev.content.decode()
    viewer = client_as(team.viewer).get("/queue/").content.decode()
    assert f"/queue/{dead_letter.pk}/requeue/" not in viewer
    none = client_as(team.developer).get("/queue/", {"batch_state": BatchState.NEW})
    assert "No row matches." in none.content.decode()


def test_requeue_asks_for_a_confirmation_then_requeues(team, dead_letter):
    client = client_as(team.developer)
    confirm = client.get(f"/queue/{dead_letter.pk}/requeue/").content.decode()
    assert "Yes, requeue" in confirm
    client.post(f"/queue/{dead_letter.pk}/requeue/")
    dead_letter.refresh_from_db()
    assert dead_letter.batch_state_id == BatchState.NEW


def test_discard_keeps_the_last_error_and_the_reason_beside_it(team, pipeline):
    job, _ = pipeline
    row = QueueRowFactory(
        process=job.steps.order_by("id").first(),
        batch_state_id=BatchState.FAILED,
        last_error="ValueError: bad header",
    )
    client_as(team.developer).post(f"/queue/{row.pk}/discard/", {"reason": "corrupt file"})
    row.refresh_from_db()
    assert row.batch_state_id == BatchState.DISCARDED
    assert row.last_error == "ValueError: bad header"
    assert row.discard_reason == "discarded by developer: corrupt file"
    page = client_as(team.viewer).get("/queue/").content.decode()
    assert "ValueError: bad header" in page and "discarded by developer: corrupt file" in page


def test_the_queue_shows_each_row_s_runs_with_their_errors(team, make_job):
    upstream = make_job("ingest")
    job = make_job("load", upstream=[upstream], max_retries=2)
    row = QueueRowFactory(process=job.steps.get(), source_process=upstream)
    runs = []
    for error in ("disk full", "schema mismatch"):
        runs.append(lifecycle.init_job(job.pk, 10).instance_exec_id)
        lifecycle.term_job(job.pk, error)
    row.refresh_from_db()
    assert row.batch_state_id == BatchState.DISCARDED
    page = client_as(team.viewer).get("/queue/").content.decode()
    history = page.split('<details class="attempts">')[1].split("</details>")[0]
    assert "2 runs" in history
    assert [f'href="/runs/{r}/"' in history for r in runs] == [True, True]
    assert history.index("disk full") < history.index("schema mismatch")


def test_ticked_rows_are_requeued_together_after_a_confirmation(team, pipeline):
    job, _ = pipeline
    step = job.steps.order_by("id").first()
    rows = [
        QueueRowFactory(process=step, batch_state_id=BatchState.DISCARDED, last_error="e")
        for _ in range(2)
    ]
    client = client_as(team.developer)
    assert 'name="ids"' in client.get("/queue/").content.decode()
    ids = [r.pk for r in rows]
    confirm = client.post("/queue/bulk/", {"action": "discard", "ids": ids})
    assert "Yes, discard 2 rows" in confirm.content.decode()  # nothing done yet
    confirm = client.post("/queue/bulk/", {"action": "requeue", "ids": ids})
    assert "Yes, requeue 2 rows" in confirm.content.decode()
    assert {BatchConsumpQueue.objects.get(pk=pk).batch_state_id for pk in ids} == {
        BatchState.DISCARDED
    }
    done = client.post(
        "/queue/bulk/", {"action": "requeue", "ids": ids, "confirm": "yes"}, follow=True
    )
    assert "2 rows queued again." in done.content.decode()
    assert {BatchConsumpQueue.objects.get(pk=pk).batch_state_id for pk in ids} == {BatchState.NEW}
    again = client.post(
        "/queue/bulk/",
        {"action": "discard", "ids": ids, "confirm": "yes", "reason": "stale"},
        follow=True,
    )
    assert "2 rows discarded." in again.content.decode()


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_a_forged_bulk_requeue_is_refused(team, dead_letter, who, status):
    client = client_as(getattr(team, who))
    body = {"action": "requeue", "ids": [dead_letter.pk], "confirm": "yes"}
    assert client.post("/queue/bulk/", body).status_code == status
    assert BatchConsumpQueue.objects.get(pk=dead_letter.pk).batch_state_id == BatchState.DISCARDED


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_a_forged_requeue_is_refused(team, dead_letter, who, status):
    client = client_as(getattr(team, who))
    assert client.post(f"/queue/{dead_letter.pk}/requeue/").status_code == status
    assert BatchConsumpQueue.objects.get(pk=dead_letter.pk).batch_state_id == BatchState.DISCARDED


def test_the_lineage_pages_search_and_draw(team, node):
    client = client_as(team.viewer)
    found = client.get("/lineage/", {"q": "total"}).content.decode()
    assert "lake.out.total" in found
    page = client.get(f"/lineage/nodes/{node.pk}/?level=column").content.decode()
    assert "Column lineage of lake.out" in page and "SUM" in page
    assert "clicks" in page  # written by the job's step


def test_odd_input_is_never_a_server_error(team, pipeline):
    client = client_as(team.viewer)
    assert client.get("/lineage/", {"q": "a\x00b"}).status_code == 200
    assert client.get("/queue/", {"marking": "a\x00b"}).status_code == 200
    assert client.get("/queue/", {"inserted_after": "yesterday"}).status_code == 200
    assert client.get("/queue/", {"page": "last"}).status_code == 200
    assert client.get("/jobs/99999999999999999999/").status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        "/queue/?job=99999999999999999999",
        "/queue/?application=99999999999999999999",
        "/queue/?table=archive&job=-99999999999999999999",
        "/batches/?source_process=99999999999999999999",
    ],
)
def test_an_id_too_large_for_the_database_is_a_filter_error(team, pipeline, url):
    answer = client_as(team.viewer).get(url)
    assert answer.status_code == 200
    assert '<p class="error">' in answer.content.decode()


def test_the_run_page_shows_each_steps_spark_options_and_links_its_ui(team, pipeline):
    _job, outcome = pipeline
    load, report = InstanceExec.objects.filter(parent_id=outcome.instance_exec_id).order_by("id")
    InstanceExec.objects.filter(pk=load.pk).update(
        spark_application_id="local-1700000000001",
        spark_ui_url="http://10.0.0.5:4040",
        spark_conf={"spark.sql.shuffle.partitions": "400", "spark.hadoop.fs.s3a.secret.key": "***"},
    )
    InstanceExec.objects.filter(pk=report.pk).update(
        spark_application_id="local-1700000000002", spark_conf={"spark.app.name": "bdre"}
    )
    page = client_as(team.viewer).get(f"/runs/{outcome.instance_exec_id}/").content.decode()
    assert (
        '<a href="http://10.0.0.5:4040" data-testid="spark-ui" rel="noopener">'
        "local-1700000000001</a>"
    ) in page
    assert "<td>spark.sql.shuffle.partitions</td><td>400</td>" in page
    assert "<td>spark.app.name</td><td>bdre</td>" in page
    # no UI (switched off, or through Spark Connect): the id, and no link
    assert '<span data-testid="spark-app">local-1700000000002</span>' in page
    assert page.count('data-testid="spark-ui"') == 1
