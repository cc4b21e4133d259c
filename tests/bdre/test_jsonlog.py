"""JSON logs (BDRE_LOG_FORMAT=json): one object per line, and every line logged during a step
run carries the run's and the step run's ids."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bdre.jsonlog import JsonFormatter, RunIdsFilter, run_context
from processes import orchestrator
from processes.models import InstanceExec
from tests.helpers.jobs import build_job, callable_step

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_lines():
    """The root logger's lines as the JSON console handler writes them, parsed."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RunIdsFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


@pytest.mark.django_db
def test_lines_logged_during_a_step_run_carry_its_run_and_step_ids(team, json_lines):
    job = build_job(
        team,
        "chatty",
        [
            callable_step("talk", "tests.processes.callables.log_a_line"),
            callable_step("fail", "tests.processes.callables.fail_until_flag", flag="/nonexistent"),
        ],
    )
    logging.getLogger("tests.outside").warning("before the run")
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    talk = InstanceExec.objects.get(process__name="talk")
    fail = InstanceExec.objects.get(process__name="fail")
    lines = json_lines()
    said = next(line for line in lines if line["logger"] == "tests.step_body")
    assert said["message"] == f"working on batch {outcome.target_batch_id}"
    assert (said["run_id"], said["step_run_id"]) == (outcome.instance_exec_id, talk.pk)
    assert said["level"] == "WARNING" and said["time"].endswith("+00:00")
    # The orchestrator's own line about the failure, inside the failing step's run.
    failed = next(
        line for line in lines if "failed" in line["message"] and "fail" in line["message"]
    )
    assert (failed["run_id"], failed["step_run_id"]) == (outcome.instance_exec_id, fail.pk)
    outside = next(line for line in lines if line["logger"] == "tests.outside")
    assert outside["run_id"] is None and outside["step_run_id"] is None


def test_an_exception_is_one_string_in_its_line(json_lines):
    with run_context(7, 8):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("tests.boom").exception("it broke")
    (line,) = [line for line in json_lines() if line["logger"] == "tests.boom"]
    assert (line["run_id"], line["step_run_id"], line["message"]) == (7, 8, "it broke")
    assert "RuntimeError: boom" in line["exception"] and "Traceback" in line["exception"]


def test_the_ids_end_with_the_step(json_lines):
    with run_context(1, 2):
        pass
    logging.getLogger("tests.after").warning("after")
    (line,) = [line for line in json_lines() if line["logger"] == "tests.after"]
    assert line["run_id"] is None


def _console(fmt: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BDRE_LOG_FORMAT"}
    if fmt is not None:
        env["BDRE_LOG_FORMAT"] = fmt
    code = (
        "import django, logging; django.setup()\n"
        "from bdre.jsonlog import run_context\n"
        "with run_context(11, 12):\n"
        "    logging.getLogger('bdre.check').warning('hello %s', 'there')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=dict(env, DJANGO_SETTINGS_MODULE="bdre.settings"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bdre_log_format_json_makes_the_console_json():
    result = _console("json")
    assert result.returncode == 0, result.stderr
    (line,) = [json.loads(x) for x in result.stderr.splitlines() if '"bdre.check"' in x]
    assert line["message"] == "hello there"
    assert (line["run_id"], line["step_run_id"]) == (11, 12)


def test_text_stays_the_default():
    result = _console(None)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "bdre.check" in x]
    assert line.endswith("WARNING bdre.check hello there")


def test_an_unknown_log_format_fails_at_start_up():
    result = _console("xml")
    assert result.returncode != 0
    assert "BDRE_LOG_FORMAT must be text or json, got 'xml'" in result.stderr
