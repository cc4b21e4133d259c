"""OpenLineage run events: START then COMPLETE or FAIL for every job run and step run, to a
file or an HTTP endpoint, valid against the schema of the OpenLineage Python client."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bdre.errors import BdreError
from lineage import openlineage
from processes import lifecycle, orchestrator
from processes.registry import StepSpec, create_job
from tests.factories import JOB_TYPE
from tests.lineage.openlineage_schema import Invalid, validate_run_event

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
CALL = 51
SLEEP = "tests.processes.callables.sleep"


def callable_step(name: str, path: str = SLEEP, **test: str) -> StepSpec:
    return StepSpec(name, CALL, properties={"callable": {"path": path}, "test": test})


def job_of(team, name: str, *steps: StepSpec):
    return create_job(
        bus_domain=team.application, name=name, process_type_id=JOB_TYPE, steps=list(steps)
    )


@pytest.fixture
def events(tmp_path, settings):
    path = tmp_path / "openlineage.jsonl"
    settings.OPENLINEAGE_FILE = str(path)
    settings.OPENLINEAGE_URL = ""

    def read() -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    return read


def summary(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["job"]["name"], e["eventType"]) for e in events]


def test_a_run_says_start_and_complete_for_the_job_and_each_step(team, events):
    job = job_of(team, "clicks", callable_step("load"), callable_step("report"))
    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded
    sent = events()
    assert summary(sent) == [
        ("clicks", "START"),
        ("clicks.load", "START"),
        ("clicks.load", "COMPLETE"),
        ("clicks.report", "START"),
        ("clicks.report", "COMPLETE"),
        ("clicks", "COMPLETE"),
    ]
    for event in sent:
        validate_run_event(event)
    job_run = sent[0]["run"]["runId"]
    assert sent[-1]["run"]["runId"] == job_run
    assert sent[1]["run"]["runId"] == sent[2]["run"]["runId"] != job_run
    parent = sent[1]["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == job_run
    assert parent["job"] == {"namespace": f"bdre.team-{team.group.pk}", "name": "clicks"}
    assert sent[0]["job"]["namespace"] == f"bdre.team-{team.group.pk}"  # names are per team
    assert sent[0]["job"]["facets"]["jobType"]["jobType"] == "JOB"
    assert sent[1]["job"]["facets"]["jobType"]["jobType"] == "TASK"
    assert sent[0]["run"]["runId"] == openlineage.run_uuid(outcome.instance_exec_id)


def test_a_failing_step_fails_the_step_and_the_job_with_the_error(team, events, tmp_path):
    job = job_of(
        team,
        "flaky",
        callable_step(
            "fragile", "tests.processes.callables.fail_until_flag", flag=str(tmp_path / "f")
        ),
    )
    assert not orchestrator.run_job(job.pk).succeeded
    sent = events()
    assert summary(sent) == [
        ("flaky", "START"),
        ("flaky.fragile", "START"),
        ("flaky.fragile", "FAIL"),
        ("flaky", "FAIL"),
    ]
    for event in sent:
        validate_run_event(event)
    error = sent[2]["run"]["facets"]["errorMessage"]
    assert "f is not there yet" in error["message"] and error["programmingLanguage"] == "python"
    assert "f is not there yet" in sent[3]["run"]["facets"]["errorMessage"]["message"]


def test_a_call_that_rolls_back_sends_nothing(team, events):
    upstream = job_of(team, "source", callable_step("emit"))
    job = job_of(team, "consumer", StepSpec("take", CALL, upstream=[upstream.pk]))
    with pytest.raises(BdreError):
        lifecycle.init_job(job.pk)  # nothing queued: 105, and the transaction rolls back
    assert events() == []


def test_nothing_is_sent_when_no_destination_is_set(team, settings, tmp_path):
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_URL = ""
    assert not openlineage.enabled()
    job = job_of(team, "quiet", callable_step("only"))
    assert orchestrator.run_job(job.pk).succeeded
    assert list(tmp_path.iterdir()) == []


class Collector(BaseHTTPRequestHandler):
    received: list[tuple[dict, dict]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Collector.received.append((dict(self.headers), json.loads(body)))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def endpoint(settings):
    Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_URL = f"http://127.0.0.1:{server.server_port}/api/v1/lineage"
    settings.OPENLINEAGE_API_KEY = "secret-key"
    yield Collector.received
    server.shutdown()
    server.server_close()


def test_events_are_posted_to_an_http_endpoint_with_the_api_key(team, endpoint):
    job = job_of(team, "posted", callable_step("only"))
    assert orchestrator.run_job(job.pk).succeeded
    assert [(b["job"]["name"], b["eventType"]) for _, b in endpoint] == [
        ("posted", "START"),
        ("posted.only", "START"),
        ("posted.only", "COMPLETE"),
        ("posted", "COMPLETE"),
    ]
    headers = endpoint[0][0]
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer secret-key"


def test_an_endpoint_that_is_down_never_fails_the_run(team, settings, caplog):
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_URL = "http://127.0.0.1:9/api/v1/lineage"  # discard port: refused
    settings.OPENLINEAGE_TIMEOUT = 1.0
    job = job_of(team, "unheard", callable_step("only"))
    with caplog.at_level(logging.WARNING, logger="lineage.openlineage"):
        assert orchestrator.run_job(job.pk).succeeded
    assert sum("refused the event" in r.getMessage() for r in caplog.records) == 4


def test_the_validator_refuses_a_broken_event(team, events):
    job = job_of(team, "checked", callable_step("only"))
    orchestrator.run_job(job.pk)
    event = events()[0]
    for broken in (
        {**event, "eventType": "DONE"},
        {**event, "run": {"runId": "run-1"}},
        {**event, "eventTime": "yesterday"},
        {k: v for k, v in event.items() if k != "job"},
        {**event, "job": {**event["job"], "facets": {"jobType": {"integration": "BDRE"}}}},
    ):
        with pytest.raises(Invalid):
            validate_run_event(broken)
