"""The lifecycle from the command line: JSON out, and on a BdreError the code and message on
stderr with the code as the exit status. The batches' own commands are in
tests/batches/test_commands.py."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from batches.models import BatchConsumpQueue
from bdre.errors import Code
from processes import schedules
from processes.models import InstanceExec, Property
from tests.helpers.commands import cli, cli_error
from tests.helpers.jobs import build_job, callable_step
from tests.helpers.lifecycle import landed, steps_of

pytestmark = pytest.mark.django_db


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
    assert status == 104
    assert body["code"] == 104
    assert "already running" in body["message"]
    assert cli_error("init_step", "--sub-process-id", str(job.pk))[1]["code"] == 103
    # 102, not 2: a script tells "no such process" from argparse's usage error.
    assert cli_error("term_job", "--process-id", "999999")[0] == 102


def test_a_usage_error_exits_2_and_no_code_collides_with_it(make_job):
    with pytest.raises(CommandError):  # argparse's exit 2 when run from the shell
        call_command("init_job", "--max-batch", "x")
    assert 2 not in {int(code) for code in Code}


def test_run_process_wait_exits_3_when_the_run_fails(team, make_job):
    job = build_job(team, "tool", [callable_step("tool_call", "processes.examples.noop")])
    Property.objects.filter(process__parent=job, config_group="callable").update(
        value="tests.processes.callables.nothere"
    )
    out = io.StringIO()
    with pytest.raises(SystemExit) as excinfo:
        call_command("run_process", "--process-id", str(job.pk), "--wait", stdout=out)
    assert excinfo.value.code == 3
    outcome = json.loads(out.getvalue())
    assert outcome["succeeded"] is False
    assert "RefusedCallable" in outcome["error"]


def test_run_process_wait_runs_the_job_here(make_job):
    job = make_job("here", steps=2)
    outcome = cli("run_process", "--process-id", str(job.pk), "--wait")
    assert outcome["succeeded"] is True
    assert sorted(map(int, outcome["steps"])) == [s.pk for s in steps_of(job)]


def test_run_process_starts_the_run_and_queues_its_steps(
    make_job, sent, django_capture_on_commit_callbacks
):
    job = make_job("later")
    with django_capture_on_commit_callbacks(execute=True):
        started = cli("run_process", "--process-id", str(job.pk))
    run = InstanceExec.objects.get(process=job)
    (step,) = steps_of(job)
    assert started == {
        "run": run.pk,
        "target_batch_id": run.target_batch_id,
        "is_rerun": False,
        "steps_queued": [step.pk],
    }
    assert [args for args, _ in sent] == [(run.pk, step.pk)]


def test_terminate_process_fails_the_running_run_or_exits_105(make_job):
    from processes import lifecycle

    job = make_job("busy")
    claim = lifecycle.init_job(job.pk, 1)
    assert cli("terminate_process", "--process-id", str(job.pk)) == {
        "terminated_run": claim.instance_exec_id
    }
    code, error = cli_error("terminate_process", "--process-id", str(job.pk))
    assert (code, error["code"]) == (105, 105)


def test_run_process_of_a_paused_job_exits_116_unless_forced(team, sent):
    job = build_job(team, "tool", [callable_step("tool_call", "processes.examples.noop")])
    schedules.set_schedule(job.pk, schedules.Schedule(every_seconds=3600))
    schedules.pause(job.pk)
    for wait in ((), ("--wait",)):
        status, body = cli_error("run_process", "--process-id", str(job.pk), *wait)
        assert (status, body["code"]) == (116, 116) and "paused" in body["message"]
    assert not InstanceExec.objects.filter(process=job).exists()
    started = cli("run_process", "--process-id", str(job.pk), "--force")
    assert InstanceExec.objects.get(process=job).pk == started["run"]
