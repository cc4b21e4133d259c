"""Every step run keeps its log in a file of its own (what BDRE, the step's
function and its prints say, and the traceback of a failure), bounded in size, deleted after
the retention, never mixed with another step's, shown on the run page with a search and a
download, and returned by the API, to the run's team only."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time

import pytest
from django_celery_beat.models import PeriodicTask

from processes import logfiles, orchestrator, tasks
from processes.models import ExecState, InstanceExec
from tests.helpers.api import api_as
from tests.helpers.jobs import build_job, callable_step
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db
TALK = "tests.processes.callables.talk_and_fail"


@pytest.fixture(autouse=True)
def log_dir(tmp_path, settings):
    settings.BDRE_LOG_DIR = tmp_path / "step-logs"
    return settings.BDRE_LOG_DIR


@pytest.fixture
def failed(team):
    """A job whose second step logs, prints and fails, run once: (job run, failed step run)."""
    job = build_job(
        team, "talker", [callable_step("warmup"), callable_step("talk", TALK, words="w1")]
    )
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    run = InstanceExec.objects.get(pk=outcome.instance_exec_id)
    return run, InstanceExec.objects.get(parent=run, process__name="talk")


# --- what a step's log holds -------------------------------------------------------------------


def test_a_failed_step_keeps_its_logging_its_prints_and_its_whole_traceback(failed, log_dir):
    run, step_run = failed
    assert step_run.exec_state_id == ExecState.FAILED
    text = (log_dir / f"run-{run.pk}" / f"step-{step_run.pk}.log").read_text()
    assert "INFO bdre.step: step talk started" in text
    assert "INFO tests.processes.callables: logged w1" in text
    assert "stdout: printed w1" in text
    assert "stderr: complained w1" in text
    assert "ERROR bdre.step: step talk failed after" in text
    assert "Traceback (most recent call last):" in text
    assert 'in talk_and_fail\n    raise ValueError(f"no good {words}")' in text
    assert text.rstrip().endswith("ValueError: no good w1")


def test_a_step_that_succeeds_says_when_it_finished(failed, log_dir):
    run, _ = failed
    warmup = InstanceExec.objects.get(parent=run, process__name="warmup")
    text = logfiles.read(warmup).lines
    assert any("step warmup finished in" in line for line in text)
    assert not any("Traceback" in line for line in text)


def test_outside_a_step_prints_and_log_records_go_where_they_went(log_dir, capsys):
    with logfiles.capture(1, 2, "inside"):
        print("said inside")
    print("said outside")
    logging.getLogger("bdre.test").warning("logged outside")
    assert "said outside" in capsys.readouterr().out
    text = (log_dir / "run-1" / "step-2.log").read_text()
    assert "said inside" in text
    assert "outside" not in text


def test_a_page_that_sets_django_up_again_leaves_the_next_steps_log_clean(
    superuser, team, log_dir, subtests
):
    """django-celery-beat's task form asks Celery for its tasks, and Celery's Django fixup
    runs ``django.setup()`` again, which configures logging anew, here inside a subtest whose
    ``sys.stderr`` is closed when it ends. The console handler keeps the process's own
    stderr, and the next step's log holds no report of a failed log line."""
    with subtests.test("the periodic task form"):
        answer = client_as(superuser).get("/admin/django_celery_beat/periodictask/add/")
        assert answer.status_code == 200
    streams = [h.stream for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]
    assert streams and all(stream is sys.__stderr__ for stream in streams)
    job = build_job(team, "after-the-form", [callable_step("warmup")])
    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded
    step_run = InstanceExec.objects.get(parent_id=outcome.instance_exec_id)
    text = "\n".join(logfiles.read(step_run).lines)
    assert "step warmup finished in" in text
    assert "Logging error" not in text and "Traceback" not in text


def test_a_line_not_ended_when_the_step_ends_is_kept(log_dir):
    with logfiles.capture(1, 3, "partial"):
        sys.stdout.write("no newline")
    assert "stdout: no newline" in (log_dir / "run-1" / "step-3.log").read_text()


def test_steps_running_in_threads_of_one_worker_never_mix_their_lines(log_dir):
    shared = logging.getLogger("bdre.shared")
    together = threading.Barrier(3)

    def step(name: str, step_run_id: int) -> None:
        with logfiles.capture(7, step_run_id, name):
            together.wait()
            for i in range(300):
                shared.info("%s line %s", name, i)
                print(f"{name} print {i}")
                if i % 50 == 0:
                    time.sleep(0.001)  # let the other threads in

    threads = [
        threading.Thread(target=step, args=(name, pk))
        for name, pk in (("alpha", 1), ("bravo", 2), ("charlie", 3))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, pk in (("alpha", 1), ("bravo", 2), ("charlie", 3)):
        lines = (log_dir / "run-7" / f"step-{pk}.log").read_text().splitlines()
        said = [line for line in lines if " line " in line or " print " in line]
        assert len(said) == 600
        assert all(name in line for line in said), [line for line in said if name not in line]


# --- bounded size ------------------------------------------------------------------------------


def test_a_log_over_the_bound_keeps_its_head_and_its_tail_and_says_what_was_cut(log_dir, settings):
    settings.BDRE_STEP_LOG_MAX_BYTES = 16 * 1024
    with pytest.raises(RuntimeError), logfiles.capture(2, 5, "chatty"):
        for i in range(5000):
            print(f"line {i:05d} " + "x" * 40)
        raise RuntimeError("the end")
    path = log_dir / "run-2" / "step-5.log"
    assert path.stat().st_size <= 16 * 1024 + 200
    text = path.read_text()
    assert "step chatty started" in text.splitlines()[0]
    assert "line 00000" in text
    assert "line 02500" not in text
    assert "line 04999" in text
    assert text.rstrip().endswith("RuntimeError: the end")
    markers = [line for line in text.splitlines() if "bytes cut here" in line]
    assert len(markers) == 1
    cut = int(markers[0].split()[2])
    assert cut > 5000 * 40 - 16 * 1024
    run = InstanceExec(pk=5, parent_id=2)
    assert logfiles.read(run).cut


def test_one_huge_line_is_cut_to_a_quarter_of_the_bound(log_dir, settings):
    settings.BDRE_STEP_LOG_MAX_BYTES = 8192
    with logfiles.capture(3, 1, "huge"):
        print("y" * 100_000)
    text = (log_dir / "run-3" / "step-1.log").read_text()
    assert "[bdre] ... line cut" in text
    assert len(text) < 8192


# --- retention ---------------------------------------------------------------------------------


def _write(path, age_days: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a line\n")
    then = time.time() - age_days * 86400
    os.utime(path, (then, then))


def test_the_purge_deletes_the_logs_older_than_the_retention_and_their_empty_folders(
    log_dir, settings
):
    settings.BDRE_STEP_LOG_RETENTION_DAYS = 30
    _write(log_dir / "run-1" / "step-2.log", 31)
    _write(log_dir / "run-1" / "step-3.log", 31)
    _write(log_dir / "run-4" / "step-5.log", 31)
    _write(log_dir / "run-4" / "step-6.log", 2)
    assert tasks.purge_step_logs() == 3
    assert not (log_dir / "run-1").exists()
    assert sorted(p.name for p in (log_dir / "run-4").iterdir()) == ["step-6.log"]


def test_a_retention_of_zero_keeps_every_log(log_dir, settings):
    settings.BDRE_STEP_LOG_RETENTION_DAYS = 0
    _write(log_dir / "run-1" / "step-2.log", 3650)
    assert logfiles.purge_expired() == 0
    assert (log_dir / "run-1" / "step-2.log").exists()


def test_beat_schedules_the_purge_when_it_starts():
    PeriodicTask.objects.filter(name=logfiles.PURGE_NAME).delete()
    tasks._schedule_the_log_purge()
    periodic = PeriodicTask.objects.get(name=logfiles.PURGE_NAME)
    assert periodic.task == "processes.tasks.purge_step_logs"
    assert periodic.interval.every == logfiles.PURGE_EVERY_SECONDS
    assert periodic.enabled


# --- the run page ------------------------------------------------------------------------------


def test_the_run_page_shows_each_steps_log_with_the_traceback(team, failed):
    run, _ = failed
    page = client_as(team.viewer).get(f"/runs/{run.pk}/").content.decode()
    assert "No log line." not in page
    assert page.count('data-testid="step-log"') == 2
    assert "Traceback (most recent call last):" in page
    assert "ValueError: no good w1" in page
    assert "stdout: printed w1" in page


def test_the_run_page_search_shows_only_the_matching_lines_whatever_their_case(team, failed):
    run, _ = failed
    client = client_as(team.viewer)
    page = client.get(f"/runs/{run.pk}/", {"q": "VALUEERROR"}).content.decode()
    assert "ValueError: no good w1" in page
    assert "printed w1" not in page
    # The traceback's source line and its last line; warmup's log has neither. (Not just
    # "1 of": the page's title, "Run 1 of talker", says that wherever the run's id is 1.)
    assert re.search(r"\b2 of \d+ lines match", page), page
    assert "0 of 2 lines match" in page
    assert 'value="VALUEERROR"' in page
    live = client.get(f"/runs/{run.pk}/live/", {"q": "printed"}).content.decode()
    assert "stdout: printed w1" in live and "Traceback" not in live


def test_the_run_page_hides_sparks_progress_until_asked_and_the_download_keeps_it(team, failed):
    run, step_run = failed
    stages = [
        f"2026-11-29 20:09:3{n}.166 INFO bdre.spark: Spark stage {n} (parquet at "
        f"NativeMethodAccessorImpl.java:0): {n}/4 tasks done, 1 running, 0 failed"
        for n in range(4)
    ]
    with logfiles.log_path(run.pk, step_run.pk).open("a") as log:
        log.write("2026-11-29 20:09:30.100 INFO bdre.spark: Spark job 0 RUNNING (stages 0)\n")
        log.write("\n".join(stages) + "\n")
        log.write("2026-11-29 20:09:40.100 INFO bdre.spark: Spark application local-17\n")
        log.write("2026-11-29 20:09:41.100 INFO bdre.spark: Spark job 1 FAILED (stages 4)\n")
        log.write(
            "2026-11-29 20:09:41.200 INFO bdre.spark: Spark stage 4 (save at "
            "NativeMethodAccessorImpl.java:0): 3/4 tasks done, 0 running, 1 failed\n"
        )
    client = client_as(team.viewer)

    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Spark stage 1 (parquet" not in page and "Spark job 0 RUNNING" not in page
    assert "Spark application local-17" in page, "what the step is, kept"
    assert "Spark job 1 FAILED" in page and "0 running, 1 failed" in page, "a failure, kept"
    assert "5 lines of Spark's progress hidden" in page
    assert '<a href="?progress=1" data-testid="show-progress">show them</a>' in page
    shown = client.get(f"/runs/{run.pk}/", {"progress": "1"}).content.decode()
    assert all(line in shown for line in stages)
    assert '<input type="hidden" name="progress" value="1">' in shown
    live = client.get(f"/runs/{run.pk}/live/", {"progress": "0"}).content.decode()
    assert "Spark stage 2 (parquet" not in live
    download = client.get(f"/runs/{run.pk}/log/", {"step": step_run.pk}).content.decode()
    assert all(line in download for line in stages)


def test_the_download_is_the_whole_log_as_a_text_file(team, failed):
    run, step_run = failed
    client = client_as(team.viewer)
    answer = client.get(f"/runs/{run.pk}/log/", {"step": step_run.pk})
    assert answer.status_code == 200
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    assert answer["Content-Disposition"] == (
        f'attachment; filename="run-{run.pk}-step-{step_run.pk}.log"'
    )
    text = answer.content.decode()
    assert text.startswith(f"==== step talk (step run {step_run.pk}) ====\n")
    assert "Traceback (most recent call last):" in text
    whole = client.get(f"/runs/{run.pk}/log/").content.decode()
    assert "==== step warmup" in whole and "==== step talk" in whole
    assert client.get(f"/runs/{run.pk}/log/", {"step": "999999"}).status_code == 404
    assert client.get(f"/runs/{run.pk}/log/", {"step": "x'"}).status_code == 404


# --- the API -----------------------------------------------------------------------------------


def test_the_api_returns_a_step_runs_log_searched_and_tailed(team, failed):
    _, step_run = failed
    api = api_as(team.viewer)
    body = api.get(f"/api/v1/runs/{step_run.pk}/log/").json()
    assert body["run"] == step_run.pk
    [step] = body["steps"]
    assert step["step"] == "talk" and step["state"] == "FAILED"
    assert step["lines"][-1] == "ValueError: no good w1"
    assert step["total_lines"] == step["matched"] == len(step["lines"])
    assert step["size"] > 0 and step["cut"] is False
    found = api.get(f"/api/v1/runs/{step_run.pk}/log/", {"q": "no GOOD"}).json()["steps"][0]
    assert found["lines"][-1] == "ValueError: no good w1"
    assert all("no good" in line for line in found["lines"])
    assert found["matched"] == len(found["lines"]) < step["total_lines"]
    tail = api.get(f"/api/v1/runs/{step_run.pk}/log/", {"tail": 2}).json()["steps"][0]
    assert tail["lines"] == step["lines"][-2:]


def test_the_api_returns_every_step_of_a_job_run_and_a_download(team, failed):
    run, _ = failed
    api = api_as(team.viewer)
    body = api.get(f"/api/v1/runs/{run.pk}/log/").json()
    assert [s["step"] for s in body["steps"]] == ["warmup", "talk"]
    answer = api.get(f"/api/v1/runs/{run.pk}/log/download/", {"q": "traceback"})
    assert answer.status_code == 200
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    assert "attachment" in answer["Content-Disposition"]
    assert "Traceback (most recent call last):" in answer.content.decode()
    assert "printed" not in answer.content.decode()


@pytest.mark.parametrize("query", [{"tail": "0"}, {"tail": "many"}, {"q": "x" * 201}])
def test_the_api_refuses_a_bad_query_with_the_field_at_fault(team, failed, query):
    run, _ = failed
    answer = api_as(team.viewer).get(f"/api/v1/runs/{run.pk}/log/", query)
    assert answer.status_code == 400
    assert set(answer.json()) == set(query)


# --- team boundaries ---------------------------------------------------------------------------


def test_an_outsider_gets_404_for_another_teams_run_log_everywhere(team, failed):
    run, step_run = failed
    api = api_as(team.outsider)
    for path in (
        f"/api/v1/runs/{run.pk}/log/",
        f"/api/v1/runs/{step_run.pk}/log/",
        f"/api/v1/runs/{run.pk}/log/download/",
    ):
        assert api.get(path).status_code == 404, path
    page = client_as(team.outsider)
    for path in (f"/runs/{run.pk}/", f"/runs/{run.pk}/log/", f"/runs/{run.pk}/live/"):
        assert page.get(path, {"step": step_run.pk}).status_code == 404, path
