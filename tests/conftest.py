from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from bdre.models import Role
from processes.models import BusDomain, Process
from processes.registry import StepSpec, create_job
from tests.factories import (
    JOB_TYPE,
    STEP_TYPE,
    BusDomainFactory,
    MembershipFactory,
    TeamFactory,
    UserFactory,
)


@dataclass
class Team:
    """One team with a member of each role, an application of its own, and an outsider: a
    developer of another team, with another application."""

    group: Group
    application: BusDomain
    viewer: object
    developer: object
    admin: object
    outsider: object
    other_group: Group
    other_application: BusDomain


# What a test needs beyond Python and the test database, as markers (registered in
# pyproject.toml; docs/testing.md): `make test-fast` deselects them all. A test gets the marker
# of a fixture it uses, directly or through another fixture; a test that needs one of these
# without its fixture carries the marker itself (`pytestmark`, or a decorator).
MARKER_FIXTURES = {
    "spark": {"spark"},  # the session's SparkSession
    # real Celery worker processes (tests/processes/test_tasks.py, test_orchestrator.py, ui)
    "worker": {"worker"},
    "browser": {"browser"},  # Playwright's Chromium (tests/ui/test_browser.py)
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKER_FIXTURES.items():
            if used & fixtures and not item.get_closest_marker(marker):
                item.add_marker(marker)


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
    yield
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


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings) -> None:
    # The production hasher costs ~0.3 s a user on purpose; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    # The cache holds log-in failures and API throttle counts: one test's must not lock out
    # or throttle the next.
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def team(db) -> Team:
    group = TeamFactory(name="analytics")
    other = TeamFactory(name="marketing")
    members = {
        role: MembershipFactory(user=UserFactory(username=role.value), team=group, role=role).user
        for role in Role
    }
    outsider = MembershipFactory(
        user=UserFactory(username="outsider"), team=other, role=Role.DEVELOPER
    ).user
    return Team(
        group=group,
        application=BusDomainFactory(name="web", team=group),
        viewer=members[Role.VIEWER],
        developer=members[Role.DEVELOPER],
        admin=members[Role.ADMIN],
        outsider=outsider,
        other_group=other,
        other_application=BusDomainFactory(name="ads", team=other),
    )


@pytest.fixture
def sent(monkeypatch):
    """The runs queued on Celery, instead of sending them: ``[((job_id, max_batch), kw)]``."""
    from processes import tasks

    calls: list[tuple] = []
    monkeypatch.setattr(
        tasks.run_process, "apply_async", lambda args, **kw: calls.append((args, kw))
    )
    return calls


@pytest.fixture
def superuser(db):
    user = UserFactory(username="root", is_staff=True, is_superuser=True)
    return user


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local[2] SparkSession for the whole suite, created on first use."""
    from pyspark.sql import SparkSession

    from processes.jobs.spark_session import SANDBOX_CONF

    session = (
        SparkSession.builder.master("local[2]")
        .appName("bdre-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        # The sandbox's settings, as the workers have them: some are static, so the steps'
        # get_spark() cannot add them to this session afterwards.
        .config(map=SANDBOX_CONF)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def make_job(team):
    """``make_job("p2", steps=2, upstream=[p1])``: a job registered through the registry,
    its steps chained in order, all in the team's application."""

    def make(
        name: str,
        *,
        steps: int = 1,
        upstream: list[Process] | None = None,
        cut: str = "",
        max_retries: int = 3,
        lease_seconds: int = 3600,
        can_recover: bool = True,
    ) -> Process:
        return create_job(
            bus_domain=team.application,
            name=name,
            process_type_id=JOB_TYPE,
            max_retries=max_retries,
            lease_seconds=lease_seconds,
            steps=[
                StepSpec(
                    f"{name}_s{i + 1}",
                    STEP_TYPE,
                    upstream=[u.pk for u in upstream or []],
                    batch_cut_pattern=cut,
                    can_recover=can_recover,
                )
                for i in range(steps)
            ],
        )

    return make


# --- the admin (tests/<app>/test_admin.py) -------------------------------------------------


def url(model, action: str, *args: object) -> str:
    """The admin page ``action`` ("changelist", "change", "add") of ``model``."""
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{action}", args=args)


def action(client, model, name: str, *pks: int):
    """Run the admin action ``name`` on the rows ``pks`` of ``model``'s changelist."""
    return client.post(
        url(model, "changelist"),
        {"action": name, "_selected_action": [str(pk) for pk in pks]},
        follow=True,
    )
