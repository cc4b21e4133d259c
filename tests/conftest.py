from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.factories import (
    UserFactory,
    grant_root,
)
from tests.helpers.jobs import build_job, callable_step, scan_step
from tests.helpers.spark import S3A_MISSING, TEST_SPARK
from tests.helpers.teams import Team, build_team

# What a test needs beyond Python and the test database, as markers (registered in
# pyproject.toml; docs/testing.md): `make test-fast` deselects them all. A test gets the marker
# of a fixture it uses, directly or through another fixture; a test that needs one of these
# without its fixture carries the marker itself (`pytestmark`, or a decorator).
MARKER_FIXTURES = {
    "spark": {"spark", "local_demo"},  # the session's SparkSession; the demo's worker's
    # real Celery worker processes (tests/processes/test_tasks.py, test_orchestrator.py, ui;
    # the demo's embedded worker)
    "worker": {"worker", "local_demo"},
    "browser": {"browser"},  # Playwright's Chromium (tests/ui/conftest.py)
    "cluster": {"standalone", "connect_server"},  # tests/cluster/
    "demo": {"local_demo"},  # `make demo`'s pipeline run once, compared and queried
}

# A test whose outcome the database or the broker can change (`backends`): it commits for
# real (transactional_db: locking, concurrency, crash safety, real workers on the broker) or
# needs PostgreSQL itself. CI runs these again on PostgreSQL with Redis, with what a module
# marks `backends` itself (constraints, migrations, the permission matrix, the queries
# behind lists and filters); everything else runs once, on SQLite (docs/testing.md). A Spark
# test's subject is the transform or the step body, a browser test's what a user sees and
# clicks (it commits only so that the live server's thread sees its rows), which neither
# changes: each is marked `backends` only by hand, deliberately.
COMMITTING_FIXTURES = {"transactional_db", "django_db_serialized_rollback"}


def _untraced_child() -> None:
    # A process forked from a test process (the concurrency tests' children, the OpenLineage
    # file's writers) inherits coverage's tracer, and with it half speed on Python 3.11, but
    # never saves what it traced: it ends in os._exit, and pytest-cov measures the test
    # process alone. Tracing stopped, it runs as it would without coverage. Only coverage's
    # tracer: a debugger's stays.
    # The C tracer is an object of coverage's; the Python one, a bound method of one.
    tracer = sys.gettrace()
    if type(getattr(tracer, "__self__", tracer)).__module__.split(".")[0] == "coverage":
        sys.settrace(None)
        threading.settrace(None)


os.register_at_fork(after_in_child=_untraced_child)


def commits_for_real(item: pytest.Item) -> bool:
    used = set(getattr(item, "fixturenames", ()))
    marker = item.get_closest_marker("django_db")
    return bool(used & COMMITTING_FIXTURES) or bool(
        marker and (marker.kwargs.get("transaction") or marker.kwargs.get("serialized_rollback"))
    )


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    # Before -m deselects by marker:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKER_FIXTURES.items():
            if used & fixtures and not item.get_closest_marker(marker):
                item.add_marker(marker)
        if (
            not item.get_closest_marker("backends")
            and not item.get_closest_marker("spark")
            and not item.get_closest_marker("browser")
            and (item.get_closest_marker("postgres") or commits_for_real(item))
        ):
            item.add_marker("backends")
        if commits_for_real(item):
            # Keeps the seed rows to restore after it (restore_seed_rows): the test database
            # is serialized when it is made only if a test asks for it.
            marker = item.get_closest_marker("django_db")
            kwargs = dict(marker.kwargs) if marker else {}
            if not kwargs.get("serialized_rollback"):
                kwargs |= {"transaction": True, "serialized_rollback": True}
                item.add_marker(pytest.mark.django_db(*(marker.args if marker else ()), **kwargs))
    result = yield
    # After -m has deselected: what this run has to do.
    longest_modules_first(items)
    return result


# Markers of a test that waits on a JVM, a worker or a browser.
WAITING_MARKERS = ("spark", "worker", "browser")


def longest_modules_first(items: list[pytest.Item]) -> None:
    """The order in which `make test` hands out modules (--no-loadscope-reorder: in this
    order; a module is one process's unit): longest first, so that no long module starts
    late and ends the suite alone. The demo and cluster module first (one process runs the
    demo, then the standalone cluster and Connect, in order), then the `long` ones, then
    those that wait on a JVM, a worker or a browser, then the rest, each group by its number
    of tests."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def group(tests: list[pytest.Item]) -> int:
        if any(shares_the_demo_or_cluster(item) for item in tests):
            return 0
        if any(item.get_closest_marker("long") for item in tests):
            return 1
        if any(item.get_closest_marker(name) for item in tests for name in WAITING_MARKERS):
            return 2
        return 3

    ordered = sorted(modules.values(), key=lambda tests: (group(tests), -len(tests)))
    items[:] = [item for tests in ordered for item in tests]


# Session fixtures too costly to set up in more than one test process of `make test`: their
# tests are in one module, which pytest-xdist (--dist loadfile) gives to one process.
SHARED_SESSION_FIXTURES = {"local_demo", "standalone", "connect_server"}


def shares_the_demo_or_cluster(item: pytest.Item) -> bool:
    names = getattr(getattr(item, "_fixtureinfo", None), "names_closure", ())
    return bool(set(names) & SHARED_SESSION_FIXTURES)


def restore_seed_rows(config: pytest.Config) -> None:
    """A test that commits for real ends by emptying every table, the seed rows of the
    migrations too (process types, states, query kinds). Django reloads them at the start of
    the next test that asks for it, and counts on the others having run before; with a
    module's tests given to whichever process is free (`make test`), one may come after.
    So they are put back as soon as the tables are emptied."""
    from django.db import connections
    from pytest_django.plugin import blocking_manager_key

    with config.stash[blocking_manager_key].unblock():
        for connection in connections.all(initialized_only=True):
            contents = getattr(connection, "_test_serialized_contents", None)
            if contents:
                connection.creation.deserialize_db_from_string(contents)


def spark_is_running() -> bool:
    """Whether this process has a SparkContext (never imports PySpark to find out)."""
    pyspark = sys.modules.get("pyspark")
    context = getattr(pyspark, "SparkContext", None)
    return getattr(context, "_active_spark_context", None) is not None


SPARK_BEFORE = pytest.StashKey[bool]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[SPARK_BEFORE] = spark_is_running()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """A test that starts Spark in this process (the JVM: seconds, and a gigabyte) must be
    marked `spark`, or `make test-fast` would start it."""
    try:
        yield
    finally:
        # After the process's last test its teardown has dropped the test database already.
        if commits_for_real(item) and nextitem is not None:
            restore_seed_rows(item.config)
    if (
        not item.stash.get(SPARK_BEFORE, True)
        and spark_is_running()
        and not item.get_closest_marker("spark")
    ):
        pytest.fail(
            f"{item.nodeid} started a SparkSession but is not marked spark: use the spark "
            "fixture, or mark it with pytest.mark.spark (docs/testing.md)",
            pytrace=False,
        )


COPIED = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def django_db_keepdb(request, django_db_modify_db_settings) -> bool:
    """pytest-django's (`--reuse-db`), or true when the test database starts from a copy of
    one these migrations made (tests/helpers/migrated.py; after the test databases' names
    are set, by django_db_modify_db_settings)."""
    if request.config.getvalue("reuse_db"):
        return True
    from tests.helpers import migrated

    copied = (
        not request.config.getvalue("create_db")
        and not request.config.getvalue("nomigrations")
        and migrated.start_from_copy()
    )
    request.config.stash[COPIED] = copied
    return copied


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_keepdb, django_db_blocker, request):
    """pytest-django's, with the migrated copy kept (made anew) or removed at the end
    (started from a copy, which pytest-django keeps as it would with `--reuse-db`)."""
    from tests.helpers import migrated

    with django_db_blocker.unblock():
        if not django_db_keepdb and not request.config.getvalue("nomigrations"):
            migrated.keep_copy()
    yield
    if request.config.stash.get(COPIED, False):
        with django_db_blocker.unblock():
            migrated.forget_copied()


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hasher() -> Iterator[None]:
    # The production hasher costs ~0.3 s a user on purpose; tests create many users. Once for
    # the session: a setting changed for each test would also make each forget what is kept
    # until a setting changes (the API's schema: bdre/schema_view.py).
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _spark_cache_emptied(request):
    """What a test cached in the session's Spark (a step's frames, its own) is dropped after
    it: the session serves every Spark test of this process, and cached blocks kept would
    crowd the next test's execution memory."""
    yield
    if "spark" in request.fixturenames:
        request.getfixturevalue("spark").catalog.clearCache()


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    # The cache holds log-in failures and API throttle counts: one test's must not lock out
    # or throttle the next.
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def team(db) -> Team:
    return build_team()


@pytest.fixture
def eager() -> Iterator[None]:
    """Tasks run in the caller, as a worker would run them (Celery's eager mode)."""
    from bdre.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def sent(monkeypatch):
    """The tasks sent to Celery, instead of sending them: ``[((job_id, max_batch), kw)]`` of
    the runs queued, ``[((job_run_id, step_id), kw)]`` of the steps."""
    from processes import tasks

    calls: list[tuple] = []
    for task in (tasks.run_process, tasks.run_step):
        monkeypatch.setattr(task, "apply_async", lambda args, **kw: calls.append((args, kw)))
    return calls


@pytest.fixture
def superuser(db):
    user = UserFactory(username="root", is_staff=True, is_superuser=True)
    return user


RUNTIME_CONF = {
    "spark.sql.shuffle.partitions": "2",
    # Expressions interpreted, never compiled to classes (Spark's own suite runs both paths):
    # on the tests' few rows, generating and compiling the projections of the shred's wide
    # rows took a sixth of this session's CPU (docs/testing.md, "Side by side"). Only here:
    # a notebook's `spark.catalog.listTables` cannot decode its tables interpreted.
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One SparkSession for the whole suite, created on first use: local[2], or the
    cluster or Connect server ``BDRE_TEST_SPARK`` names."""
    from pyspark.sql import SparkSession

    from processes.step_kinds.spark_conf import SANDBOX_CONF

    if TEST_SPARK.startswith("sc://"):
        # A Connect server has its static settings (the sandbox's, the warehouse) from its
        # own start (tests/cluster/conftest.py); a client sets only runtime ones.
        session = SparkSession.builder.remote(TEST_SPARK).getOrCreate()
        for key, value in RUNTIME_CONF.items():
            session.conf.set(key, value)
        yield session
        session.stop()
        return
    builder = (
        SparkSession.builder.master(TEST_SPARK)
        .appName("bdre-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config(map=RUNTIME_CONF)
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        # One JVM runs every Spark test of the suite: what it keeps of past queries (the SQL
        # status store, plans) grew past 300 MB beside a shred's 400 MB of execution pages,
        # and at Spark's default of 1g (the workers have SPARK_DRIVER_MEMORY, 2g) the session
        # spent minutes in full collections, then died of OutOfMemoryError (CI, PostgreSQL).
        .config("spark.driver.memory", "3g")
        # The sandbox's settings, as the workers have them: some are static, so the steps'
        # get_spark() cannot add them to this session afterwards.
        .config(map=SANDBOX_CONF)
    )
    if TEST_SPARK.startswith("spark://"):
        # Executors call the driver back on 127.0.0.1 and run this interpreter (and so this
        # checkout's installed code); the application takes at most the worker's cores.
        builder = builder.config(
            map={
                "spark.driver.host": "127.0.0.1",
                "spark.pyspark.python": sys.executable,
                "spark.cores.max": "2",
                "spark.executor.memory": "1g",
            }
        )
    # The S3A connector as the workers have it (tests/processes/step_kinds/test_s3a.py): fetched
    # into BDRE_SPARK_JARS_DIR once (make s3a-jars), then on every session's classpath.
    builder = builder.config(map=s3a_test_conf())
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def s3a_test_conf() -> dict[str, str]:
    from django.conf import settings

    from bdre import s3a_jars
    from processes.step_kinds.spark_session import s3a_conf

    if not settings.BDRE_SPARK_JARS_DIR:
        S3A_MISSING.append("BDRE_SPARK_JARS_DIR is empty")
        return {}
    try:
        s3a_jars.fetch(Path(settings.BDRE_SPARK_JARS_DIR))
    except s3a_jars.S3AJarsError as exc:
        S3A_MISSING.append(str(exc))
        return {}
    return s3a_conf({})


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory):
    """A real S3 endpoint, ``moto_server`` on 127.0.0.1, for the session. It binds a port
    the system picks (port 0) and says which in its log: a port found free beforehand could
    be taken by another process meanwhile (CI runs test processes side by side), and the
    tests would then talk to that process."""
    import re

    binary = Path(sys.executable).with_name("moto_server")
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", "0"], stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.time() + 30
    port = None
    while port is None and time.time() < deadline and proc.poll() is None:
        found = re.search(r"Running on http://127\.0\.0\.1:(\d+)", log.read_text())
        if found:
            port = int(found.group(1))
        else:
            time.sleep(0.1)
    if port is None:
        proc.kill()
        raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="session")
def local_demo(tmp_path_factory):
    """`make demo`'s pipeline run once on local[2] in a process of its own (a DemoRun):
    what the demo test checks, and what the cluster tests compare theirs with."""
    from tests.helpers.demo_runs import run_demo

    return run_demo(tmp_path_factory.mktemp("demo-local") / "var")


@pytest.fixture
def make_job(team):
    """``make_job("p2", steps=2, upstream=[p1])``: tests.helpers.jobs.build_job in the team's
    application."""
    return functools.partial(build_job, team)


# --- a chain of jobs, run by hand, and the work it queues (replay: processes/replay.py) -------


@pytest.fixture
def queued(monkeypatch, django_capture_on_commit_callbacks):
    """What would go to Celery, in order: ("job", job_id, trigger) and ("step", run, step).
    Sent on commit, as the tasks module sends them; the test's transaction never commits,
    so each piece of work here runs its callbacks itself (:func:`committed`)."""
    from processes import tasks

    calls: list[tuple] = []
    monkeypatch.setattr(
        tasks.run_process,
        "apply_async",
        lambda args, kwargs=None, **kw: calls.append(
            ("job", args[0], (kwargs or {}).get("trigger"))
        ),
    )
    monkeypatch.setattr(
        tasks.run_step, "apply_async", lambda args, **kw: calls.append(("step", *args))
    )
    return calls


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def drive(queued, committed):
    """Run what was queued, here and in order, as the workers would."""
    from bdre.errors import BdreError
    from processes import orchestrator, tasks

    def run() -> None:
        while queued:
            kind, first, second = queued.pop(0)
            with committed():
                if kind == "step":
                    if orchestrator.execute_step(first, second).state == "succeeded":
                        nxt = orchestrator.advance(first)
                        tasks.hand_on(first, nxt.ready, nxt.downstream)
                else:
                    # Nothing to do is no error: as run_process answers it.
                    with contextlib.suppress(BdreError):
                        tasks.start_run(first, trigger=second)

    return run


@pytest.fixture
def chain(team, tmp_path, settings):
    """ingest (scans landing) -> tidy (one step) -> report (one step), each run by hand;
    a.csv and b.csv in tidy's first batch, c.csv in its second."""
    from processes import orchestrator

    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing = tmp_path / "landing"
    landing.mkdir()
    grant_root(team.group, landing)
    ingest = build_job(team, "ingest", [scan_step("ingest_0", landing)])
    tidy = build_job(team, "tidy", [callable_step("tidy_0", upstream=[ingest])])
    report = build_job(team, "report", [callable_step("report_0", upstream=[tidy])])
    targets: dict[str, list[int]] = {"tidy": [], "report": []}
    for names in (("a.csv", "b.csv"), ("c.csv",)):
        for name in names:
            (landing / name).write_text(f"{name}\n")
        assert orchestrator.run_job(ingest.pk).succeeded
        for job in (tidy, report):
            outcome = orchestrator.run_job(job.pk)
            assert outcome.succeeded
            targets[job.name].append(outcome.target_batch_id)
    return SimpleNamespace(ingest=ingest, tidy=tidy, report=report, targets=targets)


@pytest.fixture(scope="session", autouse=True)
def no_database_session_outlives_the_tests(request, django_db_blocker):
    """PostgreSQL will not drop a test database another session still uses: a connection a
    test leaves open (in a thread, a process, or where Django keeps it apart while
    Playwright's event loop runs: tests/ui/conftest.py) would hold it, and its locks, to
    the end of the session. A process's sessions are gone a moment after it dies: waited
    for, up to 10 s."""
    from django.db import connection

    if connection.vendor != "postgresql":
        yield
        return
    request.getfixturevalue("django_db_setup")
    yield
    from tests.helpers.broker_clients import wait_until

    def other_sessions() -> list[tuple]:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, state, backend_start, left(query, 200) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return cursor.fetchall()

    if not wait_until(lambda: not other_sessions(), timeout=10) and (others := other_sessions()):
        pytest.fail(
            "sessions on the test database outlived the tests (pid, state, since, last "
            f"query): {others}",
            pytrace=False,
        )
