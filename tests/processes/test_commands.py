"""The lifecycle from the command line: JSON out, and on a BdreError the code and message on
stderr with exit status code - 100. The batches' own commands are in
tests/batches/test_commands.py."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from batches.models import BatchConsumpQueue
from tests.processes.conftest import landed, steps_of

pytestmark = pytest.mark.django_db


def cli(*args: str) -> object:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def cli_error(*args: str) -> tuple[int, dict]:
    err = io.StringIO()
    with pytest.raises(SystemExit) as excinfo:
        call_command(*args, stderr=err, stdout=io.StringIO())
    return excinfo.value.code, json.loads(err.getvalue())


def test_a_whole_cycle_from_the_command_line(make_job):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest])
    (step,) = steps_of(load)
    registered = cli(
        "register_file",
        "--source-process-id", str(ingest.pk),
        "--path", landed(ingest, "a.tsv"),
        "--file-size", "12",
        "--file-hash", "abc",
        "--creation-ts", "2026-11-20T08:00:00+00:00",
    )  # fmt: skip
    result = cli("init_job", "--process-id", str(load.pk), "--max-batch", "20")
    assert result["steps"][str(step.pk)]["batch_ids"] == [registered["batch_id"]]
    assert result["target_batch_marking"] == "2026-11-20"
    files = cli(
        "files_between",
        "--sub-process-id", str(step.pk),
        "--min-batch-id", str(registered["batch_id"]),
        "--max-batch-id", str(registered["batch_id"]),
    )  # fmt: skip
    assert files == [
        {"batch_id": registered["batch_id"], "path": landed(ingest, "a.tsv"), "file_size": 12,
         "file_hash": "abc"}
    ]  # fmt: skip
    sub = cli("init_step", "--sub-process-id", str(step.pk))["sub_instance_exec_id"]
    cli("heartbeat", "--instance-exec-id", str(sub))
    cli("halt_step", "--sub-process-id", str(step.pk), "--instance-exec-id", str(sub))
    cli("halt_job", "--process-id", str(load.pk), "--batch-marking", "EOD@2026-11-20")
    assert cli("reap_expired") == {"reaped": []}
    assert not BatchConsumpQueue.objects.exists()


def test_errors_exit_with_the_code_and_message(make_job):
    job = make_job("p1")
    cli("init_job", "--process-id", str(job.pk))
    status, body = cli_error("init_job", "--process-id", str(job.pk))
    assert status == 4
    assert body["code"] == 104
    assert "already running" in body["message"]
    assert cli_error("init_step", "--sub-process-id", str(job.pk))[1]["code"] == 103
    assert cli_error("term_job", "--process-id", "999999")[0] == 2


def test_run_process_wait_runs_the_job_here(make_job):
    job = make_job("here", steps=2)
    outcome = cli("run_process", "--process-id", str(job.pk), "--wait")
    assert outcome["succeeded"] is True
    assert sorted(map(int, outcome["steps"])) == [s.pk for s in steps_of(job)]


def test_run_process_queues_the_job(make_job, monkeypatch, django_capture_on_commit_callbacks):
    from processes import tasks

    sent = []
    monkeypatch.setattr(tasks.run_process, "apply_async", lambda args, **kw: sent.append(args))
    job = make_job("later")
    with django_capture_on_commit_callbacks(execute=True):
        assert cli("run_process", "--process-id", str(job.pk)) == {"queued": job.pk}
    assert sent == [(job.pk, None)]


def test_terminate_process_fails_the_running_run_or_exits_5(make_job):
    from processes import lifecycle

    job = make_job("busy")
    claim = lifecycle.init_job(job.pk, 1)
    assert cli("terminate_process", "--process-id", str(job.pk)) == {
        "terminated_run": claim.instance_exec_id
    }
    code, error = cli_error("terminate_process", "--process-id", str(job.pk))
    assert (code, error["code"]) == (5, 105)
