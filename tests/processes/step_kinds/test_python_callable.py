"""A ``python.callable`` step calls only a function an installation admin
allowed (``BDRE_CALLABLES``). Each attack is written as a team developer would try it: through
the API (a 400 on the property), and through a property changed behind the registry's back
(the run fails with the reason, and the function is never called)."""

from __future__ import annotations

import pytest

from processes import orchestrator
from processes.models import ExecState, InstanceExec, Process, ProcessLog, Property
from processes.step_kinds.python_callable import RefusedCallable, is_allowed, resolve
from tests.helpers.api import api_as
from tests.helpers.jobs import build_job, callable_step

pytestmark = pytest.mark.django_db
ATTACKS = [
    "os.system",
    "subprocess.run",
    "builtins.eval",
    "django.core.management.call_command",
    "posix.system",
    "ossify.system",  # not under an allowed prefix by a whole segment
    "tests.processes_evil.run",
    "tests.processes.callables.Path",  # imported there, defined in pathlib
    "tests.processes.callables.time",  # a module, not a function
    "tests.processes.callables.nothere",  # a missing path
    "processes.examples.missing",
    "processes.examples",
    "../../etc/passwd",
]


@pytest.mark.parametrize(
    ("path", "prefixes", "allowed"),
    [
        ("os", ["os"], True),
        ("os.system", ["os"], True),
        ("ossify", ["os"], False),
        ("ossify.x", ["os"], False),
        ("tests.processes.callables.sleep", ["tests.processes"], True),
        ("tests.processes_evil.run", ["tests.processes"], False),
        ("tests", ["tests.processes"], False),
        ("anything", [""], False),
        ("anything", [], False),
    ],
)
def test_prefixes_match_whole_dotted_segments(path, prefixes, allowed):
    assert is_allowed(path, prefixes) is allowed


@pytest.mark.parametrize("path", ATTACKS)
def test_a_function_outside_the_allowed_prefixes_is_refused_with_the_reason(path):
    with pytest.raises(RefusedCallable, match=r"callable '.*' (is not|cannot|is defined)"):
        resolve(path)


def test_the_default_allows_the_examples_and_the_tests_step_bodies(settings):
    assert settings.BDRE_CALLABLES == ["processes.examples", "tests.processes"]
    assert resolve("processes.examples.noop").__name__ == "noop"
    assert resolve("tests.processes.callables.sleep").__name__ == "sleep"


def test_an_admin_allows_more_by_setting_the_prefixes(settings):
    settings.BDRE_CALLABLES = ["json"]
    assert resolve("json.dumps").__name__ == "dumps"
    with pytest.raises(RefusedCallable, match=r"under json \(BDRE_CALLABLES\)"):
        resolve("processes.examples.noop")


# --- at registration: a 400 on the property -----------------------------------------------


@pytest.mark.parametrize("path", ATTACKS)
def test_a_developer_cannot_register_a_step_calling_a_function_not_allowed(team, path):
    response = api_as(team.developer).post(
        "/api/v1/processes/pipeline/",
        {
            "name": "tool",
            "application": team.application.name,
            "process_type": "generic-job",
            "steps": [
                {
                    "name": "tool_call",
                    "process_type": "python-callable",
                    "properties": {"callable": {"path": path}},
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    assert f"callable '{path}'" in response.content.decode()
    assert not Process.objects.filter(name__startswith="tool").exists()


def test_a_developer_cannot_point_a_step_at_os_system_through_the_properties_api(team):
    job = build_job(team, "tool", [callable_step("tool_call", "processes.examples.noop")])
    prop = Property.objects.get(process__parent=job, config_group="callable", key="path")
    response = api_as(team.developer).patch(
        f"/api/v1/properties/{prop.pk}/", {"value": "os.system"}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "BDRE_CALLABLES" in response.json()["value"][0]
    prop.refresh_from_db()
    assert prop.value == "processes.examples.noop"


# --- when the step runs: the run fails with the reason ------------------------------------


@pytest.mark.parametrize("path", ATTACKS)
def test_a_path_changed_behind_the_registry_fails_the_run_without_calling_it(team, path):
    job = build_job(team, "tool", [callable_step("tool_call", "processes.examples.noop")])
    Property.objects.filter(process__parent=job, config_group="callable").update(value=path)
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    run = InstanceExec.objects.filter(process__parent=job).get()
    assert run.exec_state_id == ExecState.FAILED
    # The refusal, not an error from calling the function with a job context.
    assert run.error.startswith(f"RefusedCallable: callable '{path}'"), run.error
    log = ProcessLog.objects.get(instance_exec=run, message_id="callable.refused")
    assert path in log.message


def test_an_allowed_function_runs_and_counts(team):
    job = build_job(team, "tool", [callable_step("tool_call", "processes.examples.log_batches")])
    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded, outcome.error
    run = InstanceExec.objects.filter(process__name="tool_call").get()
    assert run.counters["called"] == "processes.examples.log_batches"
    assert run.counters["batches"] >= 1


# --- a callable written for a driver in the worker, under Spark Connect -------------------


@pytest.mark.spark
def test_a_callable_using_the_spark_context_says_a_connect_session_has_none(team, spark):
    from processes.step_kinds.spark_session import is_connect

    job = build_job(
        team, "tool", [callable_step("tool_call", "tests.processes.callables.spark_context_user")]
    )
    outcome = orchestrator.run_job(job.pk)
    run = InstanceExec.objects.filter(process__parent__name="tool").get()
    if not is_connect(spark):  # a driver in this process: the SparkContext is there
        assert outcome.succeeded, outcome.error
        assert run.counters["parallelism"] >= 1
        return
    assert not outcome.succeeded
    assert run.exec_state_id == ExecState.FAILED
    assert run.error.startswith(
        "SparkConnectUnsupported: callable 'tests.processes.callables.spark_context_user' "
        "uses `sparkContext`, which a Spark Connect session (SPARK_REMOTE) does not have"
    ), run.error
    log = ProcessLog.objects.get(instance_exec=run, message_id="callable.connect")
    assert "`sparkContext`" in log.message


def test_what_a_connect_session_lacks_is_named_without_spark(team, monkeypatch):
    """The message, from the error a Connect session raises (made here: no session)."""
    from pyspark.errors import PySparkAttributeError

    def lacking(context):
        raise PySparkAttributeError(
            errorClass="JVM_ATTRIBUTE_NOT_SUPPORTED", messageParameters={"attr_name": "_jvm"}
        )

    monkeypatch.setattr("tests.processes.callables.sleep", lacking)
    job = build_job(team, "tool", [callable_step("tool_call", "tests.processes.callables.sleep")])
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    run = InstanceExec.objects.filter(process__parent__name="tool").get()
    assert "uses `_jvm`, which a Spark Connect session (SPARK_REMOTE)" in run.error, run.error
