from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group

from bdre.models import Role
from processes.models import BusDomain
from tests.factories import BusDomainFactory, MembershipFactory, TeamFactory, UserFactory


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


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings) -> None:
    # The production hasher costs ~0.3 s a user on purpose; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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

    session = (
        SparkSession.builder.master("local[2]")
        .appName("bdre-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
