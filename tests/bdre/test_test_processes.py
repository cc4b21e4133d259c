"""What a test process starts from: a copy of the migrated SQLite test database
(tests/helpers/migrated.py), never a template that is no migrated database; for a process it
forks, no coverage tracer (tests/conftest.py); the JVMs' class-data archive used only where
Spark's launcher takes its path (tests/helpers/jvm_archive.py); a test run sent SIGTERM still
stopping what its fixtures started, and a process a test forks still ending on it
(tests/terminate.py); and the CPU each test takes, with the processes it starts
(tests/cpu_report.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connections

from tests.helpers import jvm_archive, migrated

on_sqlite = pytest.mark.skipif(
    connections["default"].vendor != "sqlite", reason="the copy is kept only on SQLite"
)


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The template in a folder of the test's own, and this process's test database elsewhere
    in it, so that the real ones are never touched."""
    monkeypatch.setenv("BDRE_TEST_SHARED_VAR_DIR", str(tmp_path / "shared"))
    monkeypatch.setattr(migrated, "_test_database", lambda: tmp_path / "process" / "test.db")


def _template() -> Path:
    template = migrated.template()
    assert template is not None
    return template


def _migrations(database: Path) -> list[tuple[str, str]]:
    connection = sqlite3.connect(database)
    try:
        return connection.execute("SELECT app, name FROM django_migrations ORDER BY id").fetchall()
    finally:
        connection.close()


def _database(path: Path, migrations: list[tuple[str, str]] | None) -> None:
    """A test database in WAL mode, as bdre/settings.py sets it, with these migrations
    applied; with None, not even the table that records them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    if migrations is not None:
        connection.execute("CREATE TABLE django_migrations (id INTEGER PRIMARY KEY, app, name)")
        connection.executemany(
            "INSERT INTO django_migrations (app, name) VALUES (?, ?)", migrations
        )
    else:
        connection.execute("CREATE TABLE something (id INTEGER PRIMARY KEY)")
    connection.commit()
    connection.close()


@on_sqlite
@pytest.mark.usefixtures("folders")
def test_a_kept_copy_is_one_file_that_a_test_database_starts_from() -> None:
    rows = [("batches", "0001_initial"), ("processes", "0001_initial")]
    _database(migrated._test_database(), rows)

    migrated.keep_copy()
    template = _template()
    assert [p.name for p in template.parent.iterdir()] == [template.name]
    connection = sqlite3.connect(template)
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    connection.close()

    migrated.forget_copied()
    assert not migrated._test_database().exists()
    assert migrated.start_from_copy()
    assert _migrations(migrated._test_database()) == rows


@on_sqlite
@pytest.mark.usefixtures("folders")
@pytest.mark.parametrize("migrations", [[], None], ids=["none recorded", "no table for them"])
def test_a_database_no_migration_made_is_not_kept(migrations: list | None) -> None:
    _database(migrated._test_database(), migrations)

    migrated.keep_copy()

    assert not _template().exists()
    assert not migrated.start_from_copy()


@on_sqlite
@pytest.mark.usefixtures("folders")
@pytest.mark.parametrize(
    "content", [b"written over by something else " * 200, b""], ids=["written over", "empty"]
)
def test_a_template_that_is_no_migrated_database_is_removed_and_made_anew(content: bytes) -> None:
    template = _template()
    template.parent.mkdir(parents=True)
    template.write_bytes(content)

    assert not migrated.start_from_copy()
    assert not template.exists()
    assert not migrated._test_database().exists()

    _database(migrated._test_database(), [("batches", "0001_initial")])
    migrated.keep_copy()
    assert _migrations(template) == [("batches", "0001_initial")]


def test_a_forked_process_runs_without_the_coverage_tracer() -> None:
    tracer = sys.gettrace()
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child is what runs untraced
        os.write(writing, b"traced" if sys.gettrace() is not None else b"untraced")
        os._exit(0)
    os.close(writing)
    try:
        answer = os.read(reading, 100)
    finally:
        os.close(reading)
        os.waitpid(child, 0)

    assert answer == b"untraced"
    assert sys.gettrace() is tracer


def test_a_forked_process_ends_on_sigterm_as_python_would_end_it() -> None:
    assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)  # the test process's
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's end is the subject
        os.write(writing, b"started")
        time.sleep(60)
        os._exit(0)
    os.close(writing)
    try:
        assert os.read(reading, 100) == b"started"
    finally:
        os.close(reading)
    os.kill(child, signal.SIGTERM)
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


FORKING_TESTS = """
import multiprocessing, os, signal, threading


def test_pools_terminated_at_once_end():
    for _ in range(100):
        with multiprocessing.get_context("fork").Pool(4):
            pass


def test_a_process_forked_by_another_thread_has_the_default():
    found = []

    def fork():
        reading, writing = os.pipe()
        child = os.fork()
        if child == 0:
            default = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
            blocked = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
            os.write(writing, b"%d%d" % (default, blocked))
            os._exit(0)
        os.close(writing)
        found.append(os.read(reading, 10))
        os.waitpid(child, 0)

    thread = threading.Thread(target=fork)
    thread.start()
    thread.join()
    assert found == [b"10"]  # the default, and not blocked
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
"""


def test_forked_processes_end_on_sigterm_whenever_it_comes(tmp_path: Path) -> None:
    """A pool's ``terminate()`` right after the pool forked its workers: the signal comes
    while they are being forked (the concurrency tests hung in both passes of a CI run before
    SIGTERM was blocked around each fork); and a fork from a thread other than the main."""
    (tmp_path / "test_forking.py").write_text(FORKING_TESTS)
    run = Alone(tmp_path, "-p", "tests.terminate")
    out = run.finish()
    assert run.process.returncode == 0, out
    assert "2 passed" in out


@pytest.mark.parametrize(
    ("folder", "used"),
    [("jars", True), ("tmp.XmxWNKqqqr/jars", False), ("my jars", False), ("it's", False)],
)
def test_the_class_data_archive_is_used_only_where_sparks_launcher_takes_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, used: bool
) -> None:
    """Spark's launcher splits its options as a shell does, and refuses daemon options that
    hold "Xmx" anywhere (a checkout in mktemp's ``/tmp/tmp.XmxWNKqqqr`` failed every cluster
    test of a CI run): such a path gets no archive, and its JVMs start without one."""
    archive = tmp_path / folder / "spark-classes.jsa"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"an archive")
    monkeypatch.setattr(jvm_archive, "archive_path", lambda _folder: archive)

    options = jvm_archive.options(archive.parent)

    assert options == (f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off" if used else "")


class Alone:
    """A pytest run of a test folder with the plugin under test alone (the suite's
    pyproject.toml names it): without the suite's configuration, and without the plugins
    installed (Django's, schemathesis', coverage's), whose loading took most of such a run's
    CPU. In a session of its own, its output in a file: a run that hangs fails the test when
    ``finish`` times out, instead of holding it (or a pipe) for ever, and whatever of its
    group is left then is killed."""

    def __init__(self, folder: Path, *options: str, env: dict[str, str] | None = None) -> None:
        self.log = folder / "pytest.log"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        command += ["-c", os.devnull, "--rootdir", str(folder), *options, str(folder)]
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                command,
                cwd=Path(__file__).resolve().parents[2],
                env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def finish(self, timeout: float = 120) -> str:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not end in {timeout} s: {self.log.read_text()[-3000:]}")
        finally:
            self.stop()
        return self.log.read_text()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # nothing of it left
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


CANCELLED_RUN = """
import os, subprocess, time
from pathlib import Path

import pytest


@pytest.fixture
def server():
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    Path(os.environ["STARTED"]).write_text(str(proc.pid))
    yield
    proc.kill()
    proc.wait()


def test_runs_until_cancelled(server):
    while True:
        time.sleep(0.05)
"""


def test_a_test_run_sent_sigterm_stops_what_its_fixtures_started(tmp_path: Path) -> None:
    """A cancelled run: SIGTERM to pytest-xdist's controller alone, while a test process runs
    a test whose fixture started a process in a session of its own, as the cluster's
    daemons and the workers are. The fixture's teardown stops it."""
    (tmp_path / "test_cancelled.py").write_text(CANCELLED_RUN)
    started = tmp_path / "started"
    run = Alone(
        tmp_path, "-p", "xdist.plugin", "-n", "1", "-p", "tests.terminate",
        env={"STARTED": str(started)},
    )  # fmt: skip
    server = None
    try:
        deadline = time.monotonic() + 120
        while not (started.exists() and started.read_text()) and run.process.poll() is None:
            assert time.monotonic() < deadline, "the fixture never started its process"
            time.sleep(0.05)
        server = int(started.read_text())
        run.process.send_signal(signal.SIGTERM)
        out = run.finish()

        assert run.process.returncode == 2, out  # interrupted, as by Ctrl-C
        assert "KeyboardInterrupt: signal 15" in out
        with pytest.raises(ProcessLookupError):
            os.kill(server, 0)
        server = None
    finally:
        run.stop()
        if server is not None:
            os.kill(server, signal.SIGKILL)


BUSY_TESTS = """
import subprocess, sys, time


def busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_busy_itself():
    busy(0.4)


def test_busy_in_a_child():
    code = "import time\\nend = time.process_time() + 0.8\\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_idle():
    time.sleep(0.3)
"""


def test_the_cpu_report_counts_a_tests_own_cpu_and_its_childrens(tmp_path: Path) -> None:
    (tmp_path / "test_busy.py").write_text(BUSY_TESTS)
    report = tmp_path / "report"
    run = Alone(tmp_path, "-p", "tests.cpu_report", f"--cpu-report={report}")
    out = run.finish()
    assert run.process.returncode == 0, out
    (lines,) = [path.read_text().splitlines() for path in report.glob("cpu-*.jsonl")]
    tests = {(t := json.loads(line))["test"].split("::")[1]: t for line in lines}
    itself, child, idle = (tests[f"test_{n}"] for n in ("busy_itself", "busy_in_a_child", "idle"))
    assert 0.4 <= itself["own"] <= itself["cpu"] < 1.0
    assert child["cpu"] >= 0.8 and child["own"] < 0.4
    assert idle["cpu"] < 0.2 and idle["wall"] >= 0.3

    summary = subprocess.run(
        [sys.executable, "-m", "tests.cpu_report", str(report), "5"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert summary[0].startswith("3 tests, ")
    assert summary[2].endswith("  test_busy.py") and summary[2].split()[2] == "3"
    assert summary[4].endswith("test_busy.py::test_busy_in_a_child")
