"""OpenLineage run events, built and emitted by the openlineage-python client: START then
COMPLETE, FAIL or ABORT for every job run and step run, to an HTTP endpoint, a file, the log
or the client's own configuration, each valid against the OpenLineage schema the client
ships."""

from __future__ import annotations

import json
import logging
import multiprocessing
from http.server import BaseHTTPRequestHandler

import attr
import pytest
from openlineage.client.event_v2 import OutputDataset
from openlineage.client.generated import column_lineage_dataset

from bdre.errors import BdreError
from lineage import announce, openlineage
from lineage.models import LineageNode, NodeKind
from processes import lifecycle, orchestrator
from processes.models import ExecState
from tests.helpers.django_process import run_django
from tests.helpers.factories import (
    BatchFactory,
    FileFactory,
    InstanceExecFactory,
    LineageQueryFactory,
    LineageRelationFactory,
    PropertyFactory,
    QueueRowFactory,
    StepFactory,
)
from tests.helpers.jobs import EXPORT, LOAD, build_job, callable_step
from tests.helpers.local_servers import served
from tests.helpers.openlineage_schema import Invalid, validate_run_event

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
SLEEP = "tests.processes.callables.sleep"


def lines_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def events(tmp_path, settings):
    path = tmp_path / "openlineage.jsonl"
    settings.OPENLINEAGE_FILE = str(path)
    settings.OPENLINEAGE_URL = ""
    settings.OPENLINEAGE_TRANSPORT = []
    return lambda: lines_of(path)


def summary(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["job"]["name"], e["eventType"]) for e in events]


def test_a_run_says_start_and_complete_for_the_job_and_each_step(team, events):
    job = build_job(team, "clicks", [callable_step("load", SLEEP), callable_step("report", SLEEP)])
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
    assert sent[0]["producer"] == openlineage.PRODUCER
    # the client's own run facet: which client emitted the event
    tags = sent[0]["run"]["facets"]["tags"]["tags"]
    assert {"key": "openlineage_client_version", "source": "OPENLINEAGE_CLIENT"}.items() <= tags[
        0
    ].items()


def test_a_failing_step_fails_the_step_and_the_job_with_the_error(team, events, tmp_path):
    job = build_job(
        team,
        "flaky",
        [
            callable_step(
                "fragile", "tests.processes.callables.fail_until_flag", flag=str(tmp_path / "f")
            )
        ],
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


def test_a_terminated_run_fails_its_running_step_and_itself(team, events):
    job = build_job(team, "stopped", [callable_step("busy", SLEEP)])
    started = orchestrator.start(job.pk)
    lifecycle.init_step(started.ready[0], instance_exec_id=started.instance_exec_id)
    orchestrator.terminate(job.pk, "wrong input")
    sent = events()
    assert summary(sent) == [
        ("stopped", "START"),
        ("stopped.busy", "START"),
        ("stopped", "FAIL"),
        ("stopped.busy", "FAIL"),
    ]
    for event in sent:
        validate_run_event(event)
    assert sent[2]["run"]["facets"]["errorMessage"]["message"] == "wrong input"
    assert sent[3]["run"]["facets"]["errorMessage"]["message"] == "job run failed: wrong input"


def test_a_killed_run_says_abort_for_the_job_and_the_step(events):
    step = StepFactory()
    job_run = InstanceExecFactory(process=step.parent, exec_state_id=ExecState.KILLED)
    step_run = InstanceExecFactory(
        process=step, parent=job_run, exec_state_id=ExecState.KILLED, error="killed by yarn"
    )
    announce.announce_end(step_run.pk, ExecState.KILLED)
    announce.announce_end(job_run.pk, ExecState.KILLED, "its step was killed")
    sent = events()
    assert summary(sent) == [
        (f"{step.parent.name}.{step.name}", "ABORT"),
        (step.parent.name, "ABORT"),
    ]
    for event in sent:
        validate_run_event(event)
    assert sent[0]["run"]["facets"]["errorMessage"]["message"] == "killed by yarn"
    assert sent[1]["run"]["facets"]["errorMessage"]["message"] == "its step was killed"
    assert sent[0]["run"]["facets"]["parent"]["run"]["runId"] == sent[1]["run"]["runId"]


def test_a_call_that_rolls_back_sends_nothing(team, events):
    upstream = build_job(team, "source", [callable_step("emit", SLEEP)])
    job = build_job(team, "consumer", [callable_step("take", upstream=[upstream])])
    with pytest.raises(BdreError):
        lifecycle.init_job(job.pk)  # nothing queued: 105, and the transaction rolls back
    assert events() == []


def test_nothing_is_sent_when_no_destination_is_set(team, settings, tmp_path):
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_URL = ""
    settings.OPENLINEAGE_TRANSPORT = []
    assert not announce.enabled()
    job = build_job(team, "quiet", [callable_step("only", SLEEP)])
    assert orchestrator.run_job(job.pk).succeeded
    assert list(tmp_path.iterdir()) == []


# --- column lineage ---------------------------------------------------------------------------


def column(table: LineageNode, name: str, order: int = 0) -> LineageNode:
    return LineageNode.objects.create(
        node_type_id=NodeKind.COLUMN,
        container_node=table,
        qualified_name=f"{table.qualified_name}.{name}",
        display_name=name,
        node_order=order,
        team_id=table.team_id,
    )


def table(name: str, team_id: int) -> LineageNode:
    return LineageNode.objects.create(
        node_type_id=NodeKind.TABLE, qualified_name=name, display_name=name, team_id=team_id
    )


def test_any_step_with_column_relations_gets_the_column_lineage_facet(team, events):
    """Not only SQL steps: a load's recorded relations (file columns into table columns)
    become the columnLineage of the table it wrote."""
    job = build_job(team, "ingest", [callable_step("only", SLEEP)])
    step = job.steps.get()
    step.process_type_id = LOAD
    step.save(update_fields=["process_type"])
    job_run = InstanceExecFactory(process=job)
    run = InstanceExecFactory(process=step, parent=job_run, outputs=["lake.clicks"])
    run.counters = {"rows_out": 7}
    run.save(update_fields=["counters"])
    query = LineageQueryFactory(process=step, instance_exec=run)
    source = table("file:///landing/clicks", team.group.pk)
    target = table("lake.clicks", team.group.pk)
    read = {name: column(source, name) for name in ("url", "ts")}
    for order, (src, dst, dot) in enumerate(
        [("url", "url", ""), ("ts", "day", '[label="TO_DATE"]'), ("ts", "hour", '[label="HOUR"]')]
    ):
        LineageRelationFactory(
            src_node=read[src],
            target_node=column(target, dst, order),
            query=query,
            dot_string=dot,
        )
    announce.announce_end(run.pk, ExecState.SUCCESS)
    (event,) = events()
    validate_run_event(event)
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == (
        f"bdre-warehouse.team-{team.group.pk}",
        "lake.clicks",
    )
    fields = output["facets"]["columnLineage"]["fields"]
    assert fields["url"]["inputFields"] == [
        {
            "namespace": "file",
            "name": "/landing/clicks",
            "field": "url",
            "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
        }
    ]
    assert fields["day"]["inputFields"][0]["transformations"] == [
        {"type": "DIRECT", "subtype": "TRANSFORMATION", "description": "TO_DATE"}
    ]
    assert sorted(fields) == ["day", "hour", "url"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 7


def test_a_load_from_object_storage_names_its_input_by_bucket_and_folder(team):
    """Before it reads, the claimed files' folders are the load's inputs: an ``s3://``
    file's folder keeps its scheme's two slashes (a path library would make it
    ``s3:/bucket``, a local path)."""
    job = build_job(team, "ingest", [callable_step("only", SLEEP)])
    step = job.steps.get()
    step.process_type_id = LOAD
    step.save(update_fields=["process_type"])
    job_run = InstanceExecFactory(process=job)
    target = BatchFactory(bus_domain=job.bus_domain)
    run = InstanceExecFactory(process=step, parent=job_run, target_batch=target)
    claimed = QueueRowFactory(process=step, target_batch=target)
    FileFactory(batch=claimed.source_batch, path="s3://lake/in/day=1/a.csv")
    event = openlineage.run_event(run.pk, "START")
    validate_run_event(event)
    assert [(i["namespace"], i["name"]) for i in event["inputs"]] == [("s3://lake", "/in/day=1")]


def test_relations_to_a_table_not_listed_add_it_as_an_output(team, events):
    step = StepFactory(parent__bus_domain=team.application)
    run = InstanceExecFactory(process=step, parent=InstanceExecFactory(process=step.parent))
    query = LineageQueryFactory(process=step, instance_exec=run)
    source, target = table("lake.a", team.group.pk), table("lake.b", team.group.pk)
    LineageRelationFactory(
        src_node=column(source, "x"), target_node=column(target, "y"), query=query
    )
    event = openlineage.run_event(run.pk, "COMPLETE")
    validate_run_event(event)
    assert [
        (o["name"], list(o["facets"]["columnLineage"]["fields"])) for o in event["outputs"]
    ] == [("lake.b", ["y"])]


def test_an_export_to_a_database_names_it_without_its_credentials(team, events):
    step = StepFactory(parent__bus_domain=team.application, process_type_id=EXPORT)
    for key, value in {
        "source_table": "lake.orders",
        "format": "jdbc",
        "jdbc_url": "jdbc:postgresql://bob:secret@db:5432/app?ssl=true",
        "jdbc_table": "public.orders",
    }.items():
        PropertyFactory(process=step, config_group="export", key=key, value=value)
    run = InstanceExecFactory(
        process=step, parent=InstanceExecFactory(process=step.parent), inputs=["lake.orders"]
    )
    query = LineageQueryFactory(process=step, instance_exec=run)
    source = table("lake.orders", team.group.pk)
    target = table("jdbc:postgresql://db:5432/app#public.orders", team.group.pk)
    LineageRelationFactory(
        src_node=column(source, "id"), target_node=column(target, "id"), query=query
    )
    event = openlineage.run_event(run.pk, "COMPLETE")
    validate_run_event(event)
    assert "secret" not in json.dumps(event)
    (output,) = event["outputs"]  # the export's output and its lineage's target are one
    assert (output["namespace"], output["name"]) == (
        "jdbc:postgresql://db:5432/app",
        "public.orders",
    )
    assert (
        output["facets"]["columnLineage"]["fields"]["id"]["inputFields"][0]["name"] == "lake.orders"
    )
    assert [i["name"] for i in event["inputs"]] == ["lake.orders"]


# --- transports -------------------------------------------------------------------------------


class Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, dict, dict]] = []
    refuse: int = 0  # answer 503 to this many requests first

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if Collector.refuse:
            Collector.refuse -= 1
            self.send_response(503)
        else:
            Collector.received.append((self.path, dict(self.headers), json.loads(body)))
            self.send_response(201)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def endpoint(settings):
    Collector.received = []
    Collector.refuse = 0
    with served(Collector) as server:
        settings.OPENLINEAGE_FILE = ""
        settings.OPENLINEAGE_TRANSPORT = []
        settings.OPENLINEAGE_URL = f"http://127.0.0.1:{server.server_address[1]}/api/v1/lineage"
        settings.OPENLINEAGE_API_KEY = "secret-key"
        yield Collector.received


def test_events_are_posted_to_an_http_endpoint_with_the_api_key(team, endpoint):
    job = build_job(team, "posted", [callable_step("only", SLEEP)])
    assert orchestrator.run_job(job.pk).succeeded
    assert [(b["job"]["name"], b["eventType"]) for _, _, b in endpoint] == [
        ("posted", "START"),
        ("posted.only", "START"),
        ("posted.only", "COMPLETE"),
        ("posted", "COMPLETE"),
    ]
    for path, headers, body in endpoint:
        validate_run_event(body)
        assert path == "/api/v1/lineage"  # the URL as set: the whole endpoint
        assert headers["Content-Type"] == "application/json"
        assert headers["Authorization"] == "Bearer secret-key"


def test_an_endpoint_that_answers_503_gets_the_event_again(team, endpoint, settings):
    settings.OPENLINEAGE_RETRIES = 1
    Collector.refuse = 1
    job = build_job(team, "retried", [callable_step("only", SLEEP)])
    assert orchestrator.run_job(job.pk).succeeded
    assert [b["eventType"] for _, _, b in endpoint] == ["START", "START", "COMPLETE", "COMPLETE"]


def test_an_endpoint_that_is_down_never_fails_the_run(team, settings, caplog):
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_TRANSPORT = []
    settings.OPENLINEAGE_URL = "http://127.0.0.1:9/api/v1/lineage"  # discard port: refused
    settings.OPENLINEAGE_TIMEOUT = 1.0
    settings.OPENLINEAGE_RETRIES = 0
    job = build_job(team, "unheard", [callable_step("only", SLEEP)])
    with caplog.at_level(logging.WARNING, logger="lineage.openlineage"):
        assert orchestrator.run_job(job.pk).succeeded
    undelivered = [r.getMessage() for r in caplog.records if "was not delivered" in r.getMessage()]
    assert len(undelivered) == 4
    assert "Connection refused" in undelivered[0] or "Max retries" in undelivered[0]


def test_the_console_transport_logs_each_event(team, settings, caplog):
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_URL = ""
    settings.OPENLINEAGE_TRANSPORT = ["console"]
    job = build_job(team, "logged", [callable_step("only", SLEEP)])
    with caplog.at_level(logging.INFO, logger="openlineage.client.transport.console"):
        assert orchestrator.run_job(job.pk).succeeded
    logged = [
        json.loads(r.getMessage())
        for r in caplog.records
        if r.name == "openlineage.client.transport.console"
    ]
    assert summary(logged) == [
        ("logged", "START"),
        ("logged.only", "START"),
        ("logged.only", "COMPLETE"),
        ("logged", "COMPLETE"),
    ]
    for event in logged:
        validate_run_event(event)


def test_several_transports_each_get_every_event_even_when_one_is_down(
    team, settings, tmp_path, caplog
):
    path = tmp_path / "events.jsonl"
    settings.OPENLINEAGE_URL = "http://127.0.0.1:9/api/v1/lineage"
    settings.OPENLINEAGE_RETRIES = 0
    settings.OPENLINEAGE_FILE = str(path)
    settings.OPENLINEAGE_TRANSPORT = ["http", "file"]
    job = build_job(team, "both", [callable_step("only", SLEEP)])
    with caplog.at_level(logging.WARNING):
        assert orchestrator.run_job(job.pk).succeeded
    assert summary(lines_of(path)) == [
        ("both", "START"),
        ("both.only", "START"),
        ("both.only", "COMPLETE"),
        ("both", "COMPLETE"),
    ]
    assert sum("failed to emit event" in r.getMessage() for r in caplog.records) == 4


def test_the_clients_own_configuration_is_used_when_bdre_names_no_transport(
    team, settings, tmp_path, monkeypatch
):
    settings.OPENLINEAGE_FILE = ""
    settings.OPENLINEAGE_URL = ""
    settings.OPENLINEAGE_TRANSPORT = []
    path = tmp_path / "client.jsonl"
    config = tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {path}\n  append: true\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(config))
    assert announce.enabled()
    job = build_job(team, "configured", [callable_step("only", SLEEP)])
    assert orchestrator.run_job(job.pk).succeeded
    assert [e["eventType"] for e in lines_of(path)] == ["START", "START", "COMPLETE", "COMPLETE"]

    monkeypatch.delenv("OPENLINEAGE_CONFIG")
    variables = tmp_path / "variables.jsonl"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(variables))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    assert orchestrator.run_job(job.pk).succeeded
    assert [e["eventType"] for e in lines_of(variables)] == [
        "START",
        "START",
        "COMPLETE",
        "COMPLETE",
    ]

    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")  # the client's switch, honoured too
    assert not announce.enabled()


def _append(event, name: str, count: int) -> None:
    for i in range(count):
        openlineage.client().emit(
            attr.evolve(event, job=attr.evolve(event.job, name=f"{name}.{i}"))
        )


def test_workers_appending_to_one_file_keep_every_event_whole(team, events, settings):
    """Events from several processes at once, each longer than a pipe or a page: every
    line is one whole event."""
    job = build_job(team, "wide", [callable_step("only", SLEEP)])
    run = InstanceExecFactory(process=job)
    event = openlineage.build_event(run.pk, "START")
    inputs = [
        column_lineage_dataset.InputField(namespace="file", name="/landing/wide", field=f"c{i}")
        for i in range(1200)
    ]
    facet = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={"all": column_lineage_dataset.Fields(inputFields=inputs)}
    )
    event.outputs = [OutputDataset("file", "/lake/wide", facets={"columnLineage": facet})]
    fork = multiprocessing.get_context("fork")
    workers = [fork.Process(target=_append, args=(event, f"w{n}", 15)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    written = events()
    assert sorted(e["job"]["name"] for e in written) == sorted(
        f"w{n}.{i}" for n in range(4) for i in range(15)
    )
    # Longer than a pipe's buffer (64 KiB), and so than a page and the file object's buffer.
    assert len(json.dumps(written[0])) > 65_536
    for line in written:
        assert (
            len(line["outputs"][0]["facets"]["columnLineage"]["fields"]["all"]["inputFields"])
            == 1200
        )
    validate_run_event(written[0])


@pytest.mark.parametrize(
    ("environment", "error"),
    [
        ({"OPENLINEAGE_TRANSPORT": "kafka"}, "must name http, file and/or console"),
        ({"OPENLINEAGE_TRANSPORT": "http"}, "http needs OPENLINEAGE_URL"),
        ({"OPENLINEAGE_TRANSPORT": "console,file"}, "file needs OPENLINEAGE_FILE"),
    ],
)
def test_a_transport_setting_that_cannot_work_stops_the_start(environment, error):
    result = run_django("", **environment)
    assert result.returncode != 0 and error in result.stderr


def test_the_validator_refuses_a_broken_event(team, events):
    job = build_job(team, "checked", [callable_step("only", SLEEP)])
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
