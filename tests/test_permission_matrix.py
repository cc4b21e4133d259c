"""The permission matrix: every API operation and every page, as every kind of user.

One table, ``TABLE``, declares each operation once: its method, how to build its URL (and
body) for a row of team A, the least it needs (a role in the owning team, staff, superuser,
the owner of a token, or nothing), what it answers when allowed, and what a user outside
team A gets. The expected answer of each (operation, actor) pair is derived from the row,
never written by hand:

- a member of team A with the role (or more), and an installation superuser: the row's
  ``ok`` (2xx, or the redirect a page answers after a change);
- a member of team A below the role: 403 (the admin site: its log-in page);
- a member of team B (developer, admin) and a signed-in user in no team: ``outside``: 404
  on a row of team A, 400 when naming a row of team A in a body ("does not exist"), a list
  without any row of team A (and empty for the user in no team);
- anonymous: 401 from the API, the log-in page from the pages and the admin.

A write must really happen when allowed (the probe of what it changes differs afterwards)
and must change nothing when refused. Lists filtered by the id of a row of team A must answer
a user outside team A as for an id of no row (``test_a_filter_naming_...``: every filter of
every list that names a team's row, found from the viewsets' filtersets).
``test_every_route_has_a_row`` walks Django's URL resolver and DRF's router and names every
route (and method of a viewset) without a row, so that no route can be added without
declaring who may use it.

Team A's rows are built once for the module (``world``) inside a transaction that is rolled
back at the end; each row of the table is a test, each actor a subtest of it in a savepoint
of its own, so what one actor writes is gone before the next sends. Nothing here depends on
the database engine: CI runs it on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from alerts.models import Alert, AlertGate, Destination
from batches.models import (
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    BatchState,
    CatalogState,
    EtlDriver,
    EventManifest,
    File,
    HiveTable,
    Partition,
    PartitionPreview,
    ScanState,
    TableShare,
)
from bdre.api_urls import MASTER_TABLES, router
from bdre.models import ApiToken, Invitation, Membership, Role
from lineage.models import LineageNode, LineageQuery, LineageRelation
from processes import lifecycle, registry, schedules
from processes.models import (
    BusDomain,
    InstanceExec,
    Operation,
    Process,
    ProcessLog,
    ProcessTemplate,
    Property,
    Server,
)
from tests.helpers.database import rolled_back
from tests.helpers.factories import (
    TEST_PASSWORD,
    BatchFactory,
    BusDomainFactory,
    FileFactory,
    LineageNodeFactory,
    LineageQueryFactory,
    LineageRelationFactory,
    MembershipFactory,
    PropertyFactory,
    QueueRowFactory,
    ServerFactory,
    TeamFactory,
    UserFactory,
)
from tests.helpers.jobs import JOB_TYPE, SCAN, STEP_TYPE, build_job
from tests.helpers.parquet import write_parquet

# backends: who sees and may change what: the selector's queries (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]

API = "/api/v1"

# --- who ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Actor:
    name: str
    team: str | None = None  # "A" (the owning team), "B" (another team), None
    role: Role | None = None
    superuser: bool = False

    @property
    def anonymous(self) -> bool:
        return self.name == "anonymous"


ACTORS = [
    Actor("viewer", "A", Role.VIEWER),
    Actor("developer", "A", Role.DEVELOPER),
    Actor("admin", "A", Role.ADMIN),
    Actor("other-developer", "B", Role.DEVELOPER),
    Actor("other-admin", "B", Role.ADMIN),
    Actor("no-team"),
    Actor("anonymous"),
    Actor("superuser", superuser=True),
]
OWNER = "developer"  # the owner of team A's API token (tokens are a user's own)


class Need(enum.Enum):
    PUBLIC = "anyone, signed in or not"
    LOGIN = "any signed-in user"
    VIEWER = "viewer in the owning team"
    DEVELOPER = "developer in the owning team"
    ADMIN = "admin in the owning team"
    DEVELOPER_ANYWHERE = "developer in some team (registration pages)"
    STAFF = "staff (naming teams: creating one, renaming his own)"
    SUPERUSER = "installation superuser"
    OWN = "the user the row belongs to (API tokens), superusers included"


RANK = {Role.VIEWER: 1, Role.DEVELOPER: 2, Role.ADMIN: 3}
LEAST = {Need.VIEWER: 1, Need.DEVELOPER: 2, Need.ADMIN: 3, Need.DEVELOPER_ANYWHERE: 2}

# Expected answers that are redirects: to the log-in page, to the admin's log-in page, to the
# admin's index (its log-out refusing someone who may not use the admin).
TO_LOGIN = "302 to /accounts/login/"
TO_ADMIN_LOGIN = "302 to /admin/login/"
TO_ADMIN_INDEX = "302 to /admin/"
LOCATIONS = {TO_LOGIN: "/accounts/login/", TO_ADMIN_LOGIN: "/admin/login/"}

# --- the rows of team A (and around it) -----------------------------------------------------


def _landing(team: Group, name: str) -> str:
    # Inside the team's own landing folder: file registrations may name only locations
    # granted to the team (DESIGN.md section 9).
    root = Path(getattr(settings, "BDRE_LANDING", settings.VAR_DIR / "landing"))
    return str(root / f"team-{team.pk}" / name)


def _has_field(model: type, name: str) -> bool:
    return any(f.name == name for f in model._meta.get_fields())


def build_world() -> SimpleNamespace:
    from django_celery_beat.models import ClockedSchedule, CrontabSchedule, SolarSchedule
    from rest_framework.authtoken.models import Token

    w = SimpleNamespace(sent=[])
    w.team = TeamFactory(name="team-alpha")
    w.other_team = TeamFactory(name="team-bravo")
    w.share_team = TeamFactory(name="team-charlie")  # a share's target: nobody acts from it
    # Empty, so that it can be deleted; team A's members hold the same roles in it.
    w.spare_team = TeamFactory(name="team-delta")

    w.users = {}
    for actor in ACTORS:
        if actor.anonymous:
            continue
        user = UserFactory(
            username=actor.name, is_staff=actor.superuser, is_superuser=actor.superuser
        )
        w.users[actor.name] = user
        if actor.team == "A":
            MembershipFactory(user=user, team=w.team, role=actor.role)
            MembershipFactory(user=user, team=w.spare_team, role=actor.role)
        elif actor.team == "B":
            MembershipFactory(user=user, team=w.other_team, role=actor.role)
    w.member = UserFactory(username="member")  # whose membership is changed and removed
    w.membership = MembershipFactory(user=w.member, team=w.team, role=Role.VIEWER)
    w.newcomer = UserFactory(username="newcomer")  # in no team: the one added
    # Team A's pending invitation (of a name no actor holds), and one addressed to team A's
    # developer (OWNER) from the team nobody acts from: only he accepts or declines it.
    expires = timezone.now() + timedelta(days=7)
    w.invitation = Invitation.objects.create(
        team=w.team, username="invitee", role=Role.VIEWER, expires_at=expires
    )
    w.own_invitation = Invitation.objects.create(
        team=w.share_team, username=OWNER, role=Role.VIEWER, expires_at=expires
    )

    # How each actor authenticates: an API token, a session cookie.
    w.keys, w.sessions = {}, {}
    for name, user in w.users.items():
        w.keys[name] = ApiToken.issue(user, name="matrix")[1]
        client = Client()
        client.force_login(user)
        w.sessions[name] = client.cookies[settings.SESSION_COOKIE_NAME].value
    w.token, _ = ApiToken.issue(w.users[OWNER], name="alpha-own-token")

    w.app = BusDomainFactory(name="alpha_web", team=w.team)
    w.spare_app = BusDomainFactory(name="alpha_spare", team=w.team)
    w.other_app = BusDomainFactory(name="bravo_ads", team=w.other_team)
    build_job(w.other_app, "bravo_job")

    w.job = build_job(w.app, "alpha_orders")
    w.step = w.job.steps.get()
    schedules.set_schedule(w.job.pk, schedules.Schedule(every_seconds=60))
    w.paused_job = build_job(w.app, "alpha_paused")
    schedules.set_schedule(w.paused_job.pk, schedules.Schedule(every_seconds=60))
    schedules.pause(w.paused_job.pk)
    # A run with no step running (halt-job), and one whose first step runs.
    w.ready_job = build_job(w.app, "alpha_ready")
    w.ready_run = lifecycle.init_job(w.ready_job.pk).instance_exec_id
    w.live_job = build_job(w.app, "alpha_live", steps=2)
    w.live_step, w.idle_step = w.live_job.steps.order_by("id")
    w.live_run = lifecycle.init_job(w.live_job.pk).instance_exec_id
    w.step_run = lifecycle.init_step(w.live_step.pk, instance_exec_id=w.live_run)
    w.log = ProcessLog.objects.create(
        process=w.live_job, instance_exec_id=w.live_run, message="alpha log line"
    )

    w.property = PropertyFactory(process=w.step, config_group="group", key="alpha_key")
    w.template = registry.save_template(
        registry.TemplateSpec(
            name="alpha_tmpl",
            bus_domain=w.app,
            process_type_id=JOB_TYPE,
            steps=[registry.TemplateStepSpec("work", STEP_TYPE)],
            properties={"group": {"alpha": "1"}},
        )
    )

    w.batch = BatchFactory(bus_domain=w.app)
    w.file = FileFactory(batch=w.batch, path=_landing(w.team, "alpha_1.tsv"))
    w.queue_row = QueueRowFactory(
        process=w.step, source_batch=w.batch, batch_state_id=BatchState.FAILED
    )
    # What w.step made of w.batch: what a backfill, rewind or reprocess would rebuild.
    w.made = BatchFactory(bus_domain=w.app)
    w.archived = ArchiveConsumpQueue.objects.create(
        queue_id=10**9,
        source_batch=w.batch,
        target_batch=w.made,
        insert_ts=timezone.now(),
        process=w.step,
        batch_state_id=BatchState.PROCESSED,
        batch_marking="2026-11-20",
    )
    w.scan_job = build_job(
        w.app,
        "alpha_scan",
        [
            registry.StepSpec(
                "alpha_scan_s1",
                SCAN,
                properties={"scan": {"location": Path(_landing(w.team, "in")).as_uri()}},
            )
        ],
    )
    w.scan_step = w.scan_job.steps.get()
    ScanState.objects.create(
        process=w.scan_step, location=Path(_landing(w.team, "in")).as_uri(), marker="m"
    )
    w.table = HiveTable.objects.create(
        team=w.team,
        bus_domain=w.app,
        dbname="alpha_db",
        table_name="orders",
        location=str(settings.VAR_DIR / "matrix" / f"orders-{w.team.pk}"),
    )
    w.share = TableShare.objects.create(table=w.table, team=w.share_team)
    w.server = ServerFactory(team=w.team, name="alpha_server")

    w.query = LineageQueryFactory(process=w.step, query_string="SELECT a FROM alpha_db.src")
    # Nodes belong to a team where the model says so (lineage.visibility).
    owner = {"team": w.team} if _has_field(LineageNode, "team") else {}
    w.src_node = LineageNodeFactory(qualified_name="alpha_db.src", **owner)
    w.dst_node = LineageNodeFactory(qualified_name="alpha_db.dst", **owner)
    w.relation = LineageRelationFactory(src_node=w.src_node, target_node=w.dst_node, query=w.query)

    # Rows only the admin shows, so that each model has one to open.
    EtlDriver.objects.create(process=w.step, raw_table=w.table)
    ScanState.objects.create(process=w.step, location=_landing(w.team, ""))
    EventManifest.objects.create(
        manifest=f"team-{w.team.pk}/default",
        event_id="e1",
        fingerprint="f1",
        run_id=1,
        etl_time=timezone.now(),
    )
    CatalogState.objects.create(summary=["t1_alpha_db.src: created"])
    published = Partition.objects.create(
        table=w.table,
        batch=w.batch,
        location=f"{w.table.location}/batch_id={w.batch.pk}/legacy",
        state=Partition.State.PUBLISHED,
        written_at=timezone.now(),
    )
    write_parquet(Path(published.location) / "part-0.parquet", [{"order_id": 1}])
    # Read by a Spark worker already: asking for it again queues nothing.
    PartitionPreview.objects.create(
        partition=published,
        rows=20,
        state=PartitionPreview.State.DONE,
        columns=[["order_id", "bigint"]],
        values=[["1"]],
        asked_at=timezone.now(),
    )
    # Only for freshness: the matrix's failures and discards send no alert anywhere.
    w.destination = Destination.objects.create(
        team=w.team, channel="email", target="alpha@example.com", kinds="freshness"
    )
    w.alert = Alert.objects.create(
        job=w.job,
        team=w.team,
        kind="failure",
        channel="email",
        destination="alpha@example.com",
        subject="[BDRE] alpha_orders: run failed",
        status="sent",
    )
    AlertGate.objects.create(job=w.job, kind="failure")
    w.operation = Operation.objects.create(
        bus_domain=w.job.bus_domain,
        kind=Operation.Kind.REPROCESS,
        name="reprocess of alpha_orders",
        asked={"batches": [w.batch.pk]},
        plan=[{"job_id": w.job.pk, "job": w.job.name, "target_batch_id": w.batch.pk, "level": 0}],
    )
    Token.objects.create(user=w.users[OWNER])
    ClockedSchedule.objects.create(clocked_time=timezone.now() + timedelta(days=1))
    CrontabSchedule.objects.create(minute="5")
    SolarSchedule.objects.create(event="sunrise", latitude=0, longitude=0)
    return w


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Team A's rows, built once; each case's changes are rolled back by its savepoint."""
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            yield build_world()
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


# --- the table ------------------------------------------------------------------------------

W = SimpleNamespace  # the world, as the rows' builders see it
Builder = Callable[[W], Any]


@dataclass(frozen=True)
class Op:
    """One operation: a route (its URL name, or its pattern when it has none) and a method.

    ``kind``: "detail" (a row of team A in the URL), "list" (rows of the user's teams),
    "create" (a body naming a row of team A), "other" (no row of a team)."""

    area: str  # "api", "page", "admin"
    route: str
    method: str
    path: Builder
    need: Need
    kind: str = "detail"
    ok: int | str | None = None
    outside: int | str | None = None
    refused: int | str | None = None
    body: Builder | None = None
    probe: Builder | None = None  # what the operation changes: changes iff allowed
    listed: Builder | None = None  # lists: team A's row (an id in the API, a text in pages)
    model: type | None = None  # lists: no row of team A's of this model is shown outside it
    visible_to: str = "team"  # lists: "team" (A and superusers), "owner", "all"
    special: dict[str, int | str] = field(default_factory=dict)  # per actor, with the reason
    label: str = ""

    def __post_init__(self) -> None:
        defaults = {
            "ok": {"GET": 200, "POST": 201, "PUT": 200, "PATCH": 200, "DELETE": 204}[self.method]
            if self.area == "api"
            else (200 if self.method == "GET" else 302),
            "refused": TO_ADMIN_LOGIN if self.area == "admin" else 403,
            "outside": TO_ADMIN_LOGIN
            if self.area == "admin"
            else {"detail": 404, "create": 400}.get(self.kind, self.ok),
        }
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if self.kind == "list":
            object.__setattr__(self, "outside", self.ok)

    @property
    def id(self) -> str:
        return f"{self.area}:{self.method}:{self.route}{':' + self.label if self.label else ''}"


def _api(route: str, method: str, path: Builder, need: Need, **kw: Any) -> Op:
    return Op("api", route, method, lambda w, p=path: API + p(w), need, **kw)


def _list(route: str, path: str, model: type, listed: Builder, **kw: Any) -> Op:
    return _api(
        route, "GET", lambda w: path, Need.LOGIN, kind="list", model=model, listed=listed, **kw
    )


def _page(route: str, method: str, path: Builder, need: Need, **kw: Any) -> Op:
    return Op("page", route, method, path, need, **kw)


def _state(model: type, pk: Builder, *fields: str) -> Builder:
    """A probe: the fields of a row (None once it is gone)."""
    return lambda w: model.objects.filter(pk=pk(w)).values_list(*fields).first()


def _exists(model: type, **lookup: Builder) -> Builder:
    return lambda w: model.objects.filter(**{k: v(w) for k, v in lookup.items()}).exists()


def _count(model: type, **lookup: Any) -> Builder:
    return lambda w: model.objects.filter(**lookup).count()


def _schedule(job: str, attr: str) -> Builder:
    return lambda w: getattr(schedules.schedule_of(getattr(w, job).pk), attr)


def _run_state(run: str) -> Builder:
    return lambda w: InstanceExec.objects.values_list("exec_state_id").get(pk=getattr(w, run))


PIPELINE = {
    "application": "alpha_web",
    "process_type": "generic-job",
    "steps": [{"name": "a", "process_type": "python-callable"}],
}

API_TABLE = [
    # applications
    _list("application-list", "/applications/", BusDomain, lambda w: w.spare_app.pk),
    _api(
        "application-list",
        "POST",
        lambda w: "/applications/",
        Need.DEVELOPER,
        kind="create",
        body=lambda w: {"name": "alpha_new_app", "team": w.team.pk},
        probe=_count(BusDomain, name="alpha_new_app"),
    ),
    _api("application-detail", "GET", lambda w: f"/applications/{w.spare_app.pk}/", Need.VIEWER),
    _api(
        "application-detail",
        "PUT",
        lambda w: f"/applications/{w.spare_app.pk}/",
        Need.DEVELOPER,
        body=lambda w: {"name": "alpha_renamed", "team": w.team.pk, "description": "put"},
        probe=_state(BusDomain, lambda w: w.spare_app.pk, "name", "description"),
    ),
    _api(
        "application-detail",
        "PATCH",
        lambda w: f"/applications/{w.spare_app.pk}/",
        Need.DEVELOPER,
        body=lambda w: {"description": "patched"},
        probe=_state(BusDomain, lambda w: w.spare_app.pk, "description"),
    ),
    # Moving a row to another team needs a role there too: team B is not theirs.
    _api(
        "application-detail",
        "PATCH",
        lambda w: f"/applications/{w.spare_app.pk}/",
        Need.SUPERUSER,
        body=lambda w: {"team": w.other_team.pk},
        probe=_state(BusDomain, lambda w: w.spare_app.pk, "team"),
        special={"developer": 400, "admin": 400},  # a viewer is refused first (403)
        label="move to team B",
    ),
    _api(
        "application-detail",
        "DELETE",
        lambda w: f"/applications/{w.spare_app.pk}/",
        Need.ADMIN,
        probe=_state(BusDomain, lambda w: w.spare_app.pk, "pk"),
    ),
    # processes and their lifecycle
    _list("process-list", "/processes/", Process, lambda w: w.job.pk),
    _api(
        "process-list",
        "POST",
        lambda w: "/processes/",
        Need.DEVELOPER,
        kind="create",
        body=lambda w: {"name": "alpha_new_job", "bus_domain": w.app.pk, "process_type": JOB_TYPE},
        probe=_count(Process, name="alpha_new_job"),
    ),
    _api("process-detail", "GET", lambda w: f"/processes/{w.job.pk}/", Need.VIEWER),
    _api(
        "process-detail",
        "PUT",
        lambda w: f"/processes/{w.job.pk}/",
        Need.DEVELOPER,
        body=lambda w: {
            "name": "alpha_orders",
            "bus_domain": w.app.pk,
            "process_type": JOB_TYPE,
            "description": "put",
        },
        probe=_state(Process, lambda w: w.job.pk, "description"),
    ),
    _api(
        "process-detail",
        "PATCH",
        lambda w: f"/processes/{w.job.pk}/",
        Need.DEVELOPER,
        body=lambda w: {"description": "patched"},
        probe=_state(Process, lambda w: w.job.pk, "description"),
    ),
    _api(
        "process-detail",
        "DELETE",
        lambda w: f"/processes/{w.job.pk}/",
        Need.ADMIN,
        probe=_state(Process, lambda w: w.job.pk, "deleted"),
    ),
    _api(
        "process-pipeline",
        "POST",
        lambda w: "/processes/pipeline/",
        Need.DEVELOPER,
        kind="create",
        body=lambda w: {"name": "alpha_piped", **PIPELINE},
        probe=_count(Process, name="alpha_piped"),
    ),
    _api(  # registers nothing (tests/processes/test_registry_validate.py)
        "process-validate-sql",
        "POST",
        lambda w: "/processes/validate/",
        Need.DEVELOPER,
        kind="create",
        ok=200,
        body=lambda w: {"name": "alpha_checked", **PIPELINE},
    ),
    _api(
        "process-import-job",
        "POST",
        lambda w: "/processes/import/",
        Need.DEVELOPER,
        kind="create",
        body=lambda w: {"format": "bdre.pipeline/1", "name": "alpha_imported", **PIPELINE},
        probe=_count(Process, name="alpha_imported"),
    ),
    _api("process-export", "GET", lambda w: f"/processes/{w.job.pk}/export/", Need.VIEWER),
    _api(
        "process-files",
        "GET",
        lambda w: (
            f"/processes/{w.step.pk}/files/?min_batch_id={w.batch.pk}&max_batch_id={w.batch.pk}"
        ),
        Need.VIEWER,
    ),
    _api(
        "process-init-job",
        "POST",
        lambda w: f"/processes/{w.job.pk}/init-job/",
        Need.DEVELOPER,
        body=lambda w: {"max_batch": 5},
        probe=lambda w: InstanceExec.objects.filter(process=w.job).count(),
    ),
    _api(
        "process-halt-job",
        "POST",
        lambda w: f"/processes/{w.ready_job.pk}/halt-job/",
        Need.DEVELOPER,
        ok=204,
        body=lambda w: {"batch_marking": "2026-11-20"},
        probe=_run_state("ready_run"),
    ),
    _api(
        "process-term-job",
        "POST",
        lambda w: f"/processes/{w.live_job.pk}/term-job/",
        Need.DEVELOPER,
        ok=204,
        body=lambda w: {"error": "stopped by the matrix"},
        probe=_run_state("live_run"),
    ),
    _api(
        "process-init-step",
        "POST",
        lambda w: f"/processes/{w.idle_step.pk}/init-step/",
        Need.DEVELOPER,
        body=lambda w: {"instance_exec_id": w.live_run},
        probe=lambda w: InstanceExec.objects.filter(process=w.idle_step).count(),
    ),
    _api(
        "process-halt-step",
        "POST",
        lambda w: f"/processes/{w.live_step.pk}/halt-step/",
        Need.DEVELOPER,
        ok=204,
        body=lambda w: {"instance_exec_id": w.step_run},
        probe=_run_state("step_run"),
    ),
    _api(
        "process-term-step",
        "POST",
        lambda w: f"/processes/{w.live_step.pk}/term-step/",
        Need.DEVELOPER,
        ok=204,
        body=lambda w: {"error": "stopped by the matrix"},
        probe=_run_state("step_run"),
    ),
    _api(
        "process-run",
        "POST",
        lambda w: f"/processes/{w.job.pk}/run/",
        Need.DEVELOPER,
        ok=201,
        body=lambda w: {},
        probe=lambda w: (_runs_of(w.job), len(w.sent)),
    ),
    # Backfill, rewind, reprocess and a marker reset: their plans (a preview changes nothing).
    _api(
        "process-backfill",
        "POST",
        lambda w: f"/processes/{w.job.pk}/backfill/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"since": "2000-01-01", "until": "2100-01-01", "preview": True},
    ),
    _api(
        "process-rewind",
        "POST",
        lambda w: f"/processes/{w.step.pk}/rewind/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"batch": 0, "preview": True},
    ),
    _api(
        "process-reset-marker",
        "POST",
        lambda w: f"/processes/{w.scan_step.pk}/reset-marker/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"key": "", "preview": True},
    ),
    _api(
        "process-terminate",
        "POST",
        lambda w: f"/processes/{w.live_job.pk}/terminate/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"error": "stopped by the matrix"},
        probe=_run_state("live_run"),
    ),
    _api("process-schedule", "GET", lambda w: f"/processes/{w.job.pk}/schedule/", Need.VIEWER),
    _api(
        "process-schedule",
        "PUT",
        lambda w: f"/processes/{w.job.pk}/schedule/",
        Need.DEVELOPER,
        body=lambda w: {"every_seconds": 120},
        probe=_schedule("job", "every_seconds"),
    ),
    _api(
        "process-pause",
        "POST",
        lambda w: f"/processes/{w.job.pk}/pause/",
        Need.DEVELOPER,
        ok=200,
        probe=_schedule("job", "enabled"),
    ),
    _api(
        "process-resume",
        "POST",
        lambda w: f"/processes/{w.paused_job.pk}/resume/",
        Need.DEVELOPER,
        ok=200,
        probe=_schedule("paused_job", "enabled"),
    ),
    # templates
    _list("template-list", "/templates/", ProcessTemplate, lambda w: w.template.pk),
    _api(
        "template-list",
        "POST",
        lambda w: "/templates/",
        Need.DEVELOPER,
        kind="create",
        body=lambda w: {"name": "alpha_new_tmpl", **PIPELINE},
        probe=_count(ProcessTemplate, name="alpha_new_tmpl", deleted=False),
    ),
    _api("template-detail", "GET", lambda w: f"/templates/{w.template.pk}/", Need.VIEWER),
    _api(
        "template-detail",
        "PUT",
        lambda w: f"/templates/{w.template.pk}/",
        Need.DEVELOPER,
        body=lambda w: {
            "name": "alpha_tmpl",
            "application": "alpha_web",
            "process_type": JOB_TYPE,
            "steps": [{"name": "changed", "process_type": STEP_TYPE}],
        },
        probe=lambda w: sorted(
            ProcessTemplate.objects.filter(parent=w.template, deleted=False).values_list(
                "name", flat=True
            )
        ),
    ),
    _api(
        "template-detail",
        "DELETE",
        lambda w: f"/templates/{w.template.pk}/",
        Need.DEVELOPER,
        probe=_state(ProcessTemplate, lambda w: w.template.pk, "deleted"),
    ),
    _api(
        "template-instantiate",
        "POST",
        lambda w: f"/templates/{w.template.pk}/instantiate/",
        Need.DEVELOPER,
        body=lambda w: {"name": "alpha_from_tmpl"},
        probe=_count(Process, name="alpha_from_tmpl"),
    ),
    # properties
    _list("property-list", "/properties/", Property, lambda w: w.property.pk),
    _api(
        "property-list",
        "POST",
        lambda w: "/properties/",
        Need.DEVELOPER,
        kind="create",
        body=lambda w: {
            "process": w.step.pk,
            "config_group": "options",
            "key": "executor_memory",
            "value": "2g",
        },
        probe=_count(Property, key="executor_memory"),
    ),
    _api("property-detail", "GET", lambda w: f"/properties/{w.property.pk}/", Need.VIEWER),
    _api(
        "property-detail",
        "PUT",
        lambda w: f"/properties/{w.property.pk}/",
        Need.DEVELOPER,
        body=lambda w: {
            "process": w.step.pk,
            "config_group": "group",
            "key": "alpha_key",
            "value": "put",
        },
        probe=_state(Property, lambda w: w.property.pk, "value"),
    ),
    _api(
        "property-detail",
        "PATCH",
        lambda w: f"/properties/{w.property.pk}/",
        Need.DEVELOPER,
        body=lambda w: {"value": "patched"},
        probe=_state(Property, lambda w: w.property.pk, "value"),
    ),
    _api(
        "property-detail",
        "DELETE",
        lambda w: f"/properties/{w.property.pk}/",
        Need.DEVELOPER,
        probe=_state(Property, lambda w: w.property.pk, "pk"),
    ),
    # runs and logs
    _list("run-list", "/runs/", InstanceExec, lambda w: w.live_run),
    _list("operation-list", "/operations/", Operation, lambda w: w.operation.pk),
    _api("operation-detail", "GET", lambda w: f"/operations/{w.operation.pk}/", Need.VIEWER),
    # A catch-up's plan (a preview changes nothing): 112, nothing to catch up, for the owner.
    _api(
        "process-catch-up",
        "POST",
        lambda w: f"/processes/{w.job.pk}/catch-up/",
        Need.DEVELOPER,
        ok=409,
        body=lambda w: {"since": "2000-01-01", "preview": True},
    ),
    _api("run-detail", "GET", lambda w: f"/runs/{w.live_run}/", Need.VIEWER),
    _api("run-logs", "GET", lambda w: f"/runs/{w.live_run}/logs/", Need.VIEWER),
    _api("run-log", "GET", lambda w: f"/runs/{w.live_run}/log/", Need.VIEWER),
    _api("run-log-download", "GET", lambda w: f"/runs/{w.live_run}/log/download/", Need.VIEWER),
    _api(
        "run-heartbeat",
        "POST",
        lambda w: f"/runs/{w.live_run}/heartbeat/",
        Need.DEVELOPER,
        ok=200,
        probe=_state(InstanceExec, lambda w: w.live_run, "lease_expires_at"),
    ),
    _api(
        "run-retry",
        "POST",
        lambda w: f"/runs/{w.live_run}/retry/",
        Need.DEVELOPER,
        ok=409,  # a run going: nothing to retry (118); tests/processes/test_retry.py retries
    ),
    _list("log-list", "/logs/", ProcessLog, lambda w: w.log.pk),
    _api("log-detail", "GET", lambda w: f"/logs/{w.log.pk}/", Need.VIEWER),
    # batches, the queue, the archive, files
    _list("batch-list", "/batches/", Batch, lambda w: w.batch.pk),
    _api("batch-detail", "GET", lambda w: f"/batches/{w.batch.pk}/", Need.VIEWER),
    _list("queue-list", "/queue/", BatchConsumpQueue, lambda w: w.queue_row.pk),
    _api("queue-detail", "GET", lambda w: f"/queue/{w.queue_row.pk}/", Need.VIEWER),
    _api(
        "batch-reprocess",
        "POST",
        lambda w: f"/batches/{w.batch.pk}/reprocess/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"preview": True},
    ),
    _api(
        "file-reprocess",
        "POST",
        lambda w: f"/files/{w.file.pk}/reprocess/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"preview": True},
    ),
    _api(
        "queue-requeue",
        "POST",
        lambda w: f"/queue/{w.queue_row.pk}/requeue/",
        Need.DEVELOPER,
        ok=200,
        probe=_state(BatchConsumpQueue, lambda w: w.queue_row.pk, "batch_state_id"),
    ),
    _api(
        "queue-discard",
        "POST",
        lambda w: f"/queue/{w.queue_row.pk}/discard/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"reason": "discarded by the matrix"},
        probe=_state(BatchConsumpQueue, lambda w: w.queue_row.pk, "batch_state_id"),
    ),
    # Many rows at once: ids of another team's rows answer as ids of no row (404 when none
    # named is the user's to see), a visible row without the role makes it a 403.
    _api(
        "queue-requeue-many",
        "POST",
        lambda w: "/queue/requeue/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"ids": [w.queue_row.pk]},
        probe=_state(BatchConsumpQueue, lambda w: w.queue_row.pk, "batch_state_id"),
    ),
    _api(
        "queue-discard-many",
        "POST",
        lambda w: "/queue/discard/",
        Need.DEVELOPER,
        ok=200,
        body=lambda w: {"ids": [w.queue_row.pk], "reason": "discarded by the matrix"},
        probe=_state(BatchConsumpQueue, lambda w: w.queue_row.pk, "batch_state_id"),
    ),
    _list("archive-list", "/archive/", ArchiveConsumpQueue, lambda w: w.archived.pk),
    _api("archive-detail", "GET", lambda w: f"/archive/{w.archived.pk}/", Need.VIEWER),
    _list("file-list", "/files/", File, lambda w: w.file.pk),
    _api("file-detail", "GET", lambda w: f"/files/{w.file.pk}/", Need.VIEWER),
    _api(
        "file-register",
        "POST",
        lambda w: "/files/register/",
        Need.DEVELOPER,
        # the job is named in the body, and acted on: another team's is not found (404)
        outside=404,
        kind="create",
        body=lambda w: {
            "source_process_id": w.job.pk,
            "path": _landing(w.team, "alpha_2.tsv"),
            "file_size": 10,
            "file_hash": "alpha-2",
            "creation_ts": "2026-11-20T10:00:00Z",
        },
        probe=_count(File, file_hash="alpha-2"),
    ),
    # tables and their shares
    _list("table-list", "/tables/", HiveTable, lambda w: w.table.pk),
    _api("table-detail", "GET", lambda w: f"/tables/{w.table.pk}/", Need.VIEWER),
    _api("table-partitions", "GET", lambda w: f"/tables/{w.table.pk}/partitions/", Need.VIEWER),
    _api("table-preview", "GET", lambda w: f"/tables/{w.table.pk}/preview/", Need.VIEWER),
    # Asking for rows read already: answered at once, nothing queued (a shared reader of the
    # table may too: share_team's, whom no actor is).
    _api(
        "table-preview",
        "POST",
        lambda w: f"/tables/{w.table.pk}/preview/",
        Need.VIEWER,
        ok=200,
    ),
    _list("table-share-list", "/table-shares/", TableShare, lambda w: w.share.pk),
    _api(
        "table-share-list",
        "POST",
        lambda w: "/table-shares/",
        Need.ADMIN,
        kind="create",
        body=lambda w: {"table": w.table.pk, "team": w.other_team.pk},
        probe=_exists(TableShare, table=lambda w: w.table, team=lambda w: w.other_team),
    ),
    _api("table-share-detail", "GET", lambda w: f"/table-shares/{w.share.pk}/", Need.VIEWER),
    _api(
        "table-share-detail",
        "DELETE",
        lambda w: f"/table-shares/{w.share.pk}/",
        Need.ADMIN,
        probe=_state(TableShare, lambda w: w.share.pk, "pk"),
    ),
    # alerts and the teams' alert destinations
    _list("alert-list", "/alerts/", Alert, lambda w: w.alert.pk),
    _api("alert-detail", "GET", lambda w: f"/alerts/{w.alert.pk}/", Need.VIEWER),
    _list(
        "alert-destination-list", "/alert-destinations/", Destination, lambda w: w.destination.pk
    ),
    _api(
        "alert-destination-list",
        "POST",
        lambda w: "/alert-destinations/",
        Need.ADMIN,
        kind="create",
        body=lambda w: {"team": w.team.pk, "channel": "email", "target": "alpha-new@example.com"},
        probe=_count(Destination, target="alpha-new@example.com"),
    ),
    _api(
        "alert-destination-detail",
        "GET",
        lambda w: f"/alert-destinations/{w.destination.pk}/",
        Need.VIEWER,
    ),
    _api(
        "alert-destination-detail",
        "PUT",
        lambda w: f"/alert-destinations/{w.destination.pk}/",
        Need.ADMIN,
        body=lambda w: {
            "team": w.team.pk,
            "channel": "email",
            "target": "alpha-put@example.com",
            "kinds": "sla",
        },
        probe=_state(Destination, lambda w: w.destination.pk, "target", "kinds"),
    ),
    _api(
        "alert-destination-detail",
        "PATCH",
        lambda w: f"/alert-destinations/{w.destination.pk}/",
        Need.ADMIN,
        body=lambda w: {"kinds": "sla"},
        probe=_state(Destination, lambda w: w.destination.pk, "kinds"),
    ),
    _api(
        "alert-destination-detail",
        "DELETE",
        lambda w: f"/alert-destinations/{w.destination.pk}/",
        Need.ADMIN,
        probe=_state(Destination, lambda w: w.destination.pk, "pk"),
    ),
    # servers
    _list("server-list", "/servers/", Server, lambda w: w.server.pk),
    _api(
        "server-list",
        "POST",
        lambda w: "/servers/",
        Need.ADMIN,
        kind="create",
        body=lambda w: {"team": w.team.pk, "server_type": "s3", "name": "alpha_lake"},
        probe=_count(Server, name="alpha_lake"),
    ),
    # A server's root and the teams it is granted to: installation superusers only,
    # whatever role the caller holds in the server's team (DESIGN.md section 9).
    _api(
        "server-list",
        "POST",
        lambda w: "/servers/",
        Need.SUPERUSER,
        kind="create",
        body=lambda w: {
            "team": w.team.pk,
            "server_type": "s3",
            "name": "alpha_rooted",
            "root": "s3://alpha-bucket/in/",
        },
        probe=_count(Server, name="alpha_rooted"),
        # Refused before any field is read, the team's included: the same 403 for all.
        outside=403,
        label="root",
    ),
    _api(
        "server-detail",
        "PATCH",
        lambda w: f"/servers/{w.server.pk}/",
        Need.SUPERUSER,
        body=lambda w: {"root": "s3://alpha-bucket/in/"},
        probe=_state(Server, lambda w: w.server.pk, "root"),
        label="root",
    ),
    _api(
        "server-detail",
        "PATCH",
        lambda w: f"/servers/{w.server.pk}/",
        Need.SUPERUSER,
        body=lambda w: {"granted_teams": [w.other_team.pk]},
        probe=lambda w: list(w.server.granted_teams.values_list("pk", flat=True)),
        label="grant",
    ),
    _api("server-detail", "GET", lambda w: f"/servers/{w.server.pk}/", Need.VIEWER),
    _api(
        "server-detail",
        "PUT",
        lambda w: f"/servers/{w.server.pk}/",
        Need.ADMIN,
        body=lambda w: {
            "team": w.team.pk,
            "server_type": "sftp",
            "name": "alpha_server",
            "metainfo": "put",
        },
        probe=_state(Server, lambda w: w.server.pk, "server_type", "metainfo"),
    ),
    _api(
        "server-detail",
        "PATCH",
        lambda w: f"/servers/{w.server.pk}/",
        Need.ADMIN,
        body=lambda w: {"metainfo": "https://s3.example"},
        probe=_state(Server, lambda w: w.server.pk, "metainfo"),
    ),
    _api(
        "server-detail",
        "DELETE",
        lambda w: f"/servers/{w.server.pk}/",
        Need.ADMIN,
        probe=_state(Server, lambda w: w.server.pk, "pk"),
    ),
    # lineage
    _list("lineage-query-list", "/lineage/queries/", LineageQuery, lambda w: w.query.pk),
    _api(
        "lineage-query-list",
        "POST",
        lambda w: "/lineage/queries/",
        Need.DEVELOPER,
        kind="create",
        body=lambda w: {"query_string": "SELECT 1 AS alpha_col", "process": w.step.pk},
        probe=_count(LineageQuery, query_string="SELECT 1 AS alpha_col"),
    ),
    _api("lineage-query-detail", "GET", lambda w: f"/lineage/queries/{w.query.pk}/", Need.VIEWER),
    _api(
        "lineage-query-detail",
        "DELETE",
        lambda w: f"/lineage/queries/{w.query.pk}/",
        Need.ADMIN,
        probe=_state(LineageQuery, lambda w: w.query.pk, "pk"),
    ),
    _api(
        "lineage-query-relations",
        "GET",
        lambda w: f"/lineage/queries/{w.query.pk}/relations/",
        Need.VIEWER,
    ),
    _list("lineage-node-list", "/lineage/nodes/", LineageNode, lambda w: w.src_node.pk),
    _api("lineage-node-detail", "GET", lambda w: f"/lineage/nodes/{w.src_node.pk}/", Need.VIEWER),
    _api(
        "lineage-node-upstream",
        "GET",
        lambda w: f"/lineage/nodes/{w.dst_node.pk}/upstream/",
        Need.VIEWER,
    ),
    _api(
        "lineage-node-downstream",
        "GET",
        lambda w: f"/lineage/nodes/{w.src_node.pk}/downstream/",
        Need.VIEWER,
    ),
    _list("lineage-relation-list", "/lineage/relations/", LineageRelation, lambda w: w.relation.pk),
    _api(
        "lineage-relation-detail",
        "GET",
        lambda w: f"/lineage/relations/{w.relation.pk}/",
        Need.VIEWER,
    ),
    *[
        _api(
            "lineage-graph",
            "GET",
            lambda w, kind=kind, of=of: f"/lineage/graph/{kind}/{getattr(w, of).pk}/",
            Need.VIEWER,
            label=kind,
        )
        for kind, of in [
            ("table", "src_node"),
            ("column", "src_node"),
            ("process", "job"),
            ("batch", "batch"),
        ]
    ],
    # teams and members
    _list("team-list", "/teams/", Group, lambda w: w.team.pk),
    _api(
        "team-list",
        "POST",
        lambda w: "/teams/",
        Need.STAFF,
        kind="other",
        outside=403,
        body=lambda w: {"name": "team-echo"},
        probe=_count(Group, name="team-echo"),
    ),
    _api("team-detail", "GET", lambda w: f"/teams/{w.team.pk}/", Need.VIEWER),
    _api(
        "team-detail",
        "PUT",
        lambda w: f"/teams/{w.team.pk}/",
        Need.STAFF,  # an admin of the team who is staff: names are installation-wide
        body=lambda w: {"name": "team-alpha-put"},
        probe=_state(Group, lambda w: w.team.pk, "name"),
    ),
    _api(
        "team-detail",
        "PATCH",
        lambda w: f"/teams/{w.team.pk}/",
        Need.STAFF,  # an admin of the team who is staff: names are installation-wide
        body=lambda w: {"name": "team-alpha-patched"},
        probe=_state(Group, lambda w: w.team.pk, "name"),
    ),
    _api(
        "team-detail",
        "DELETE",
        # an empty team in which team A's members hold their roles (team A has applications)
        lambda w: f"/teams/{w.spare_team.pk}/",
        Need.SUPERUSER,
        probe=_state(Group, lambda w: w.spare_team.pk, "pk"),
    ),
    _list("membership-list", "/memberships/", Membership, lambda w: w.membership.pk),
    # Only a superuser adds a member directly, refused before the body is read (a team
    # admin invites): no answer tells whether the user name exists.
    _api(
        "membership-list",
        "POST",
        lambda w: "/memberships/",
        Need.SUPERUSER,
        kind="create",
        outside=403,
        body=lambda w: {"user": "newcomer", "team": w.team.pk, "role": "viewer"},
        probe=_count(Membership, user__username="newcomer"),
    ),
    _api("membership-detail", "GET", lambda w: f"/memberships/{w.membership.pk}/", Need.VIEWER),
    _api(
        "membership-detail",
        "PUT",
        lambda w: f"/memberships/{w.membership.pk}/",
        Need.ADMIN,
        body=lambda w: {"user": "member", "team": w.team.pk, "role": "developer"},
        probe=_state(Membership, lambda w: w.membership.pk, "role"),
    ),
    _api(
        "membership-detail",
        "PATCH",
        lambda w: f"/memberships/{w.membership.pk}/",
        Need.ADMIN,
        body=lambda w: {"role": "admin"},
        probe=_state(Membership, lambda w: w.membership.pk, "role"),
    ),
    _api(
        "membership-detail",
        "DELETE",
        lambda w: f"/memberships/{w.membership.pk}/",
        Need.ADMIN,
        probe=_state(Membership, lambda w: w.membership.pk, "pk"),
    ),
    # invitations: a team's members see its pending ones, its admins send and cancel them;
    # only the user they name accepts or declines them
    _list("invitation-list", "/invitations/", Invitation, lambda w: w.invitation.pk),
    _api(
        "invitation-list",
        "POST",
        lambda w: "/invitations/",
        Need.ADMIN,
        kind="create",
        ok=202,
        body=lambda w: {"team": w.team.pk, "username": "newcomer", "role": "admin"},
        probe=_count(Invitation, username="newcomer"),
    ),
    _api("invitation-detail", "GET", lambda w: f"/invitations/{w.invitation.pk}/", Need.VIEWER),
    _api(
        "invitation-detail",
        "DELETE",
        lambda w: f"/invitations/{w.invitation.pk}/",
        Need.ADMIN,
        probe=_state(Invitation, lambda w: w.invitation.pk, "pk"),
    ),
    _api(
        "invitation-accept",
        "POST",
        lambda w: f"/invitations/{w.own_invitation.pk}/accept/",
        Need.OWN,
        outside=404,
        probe=_count(Membership, user__username=OWNER, team__name="team-charlie"),
    ),
    _api(
        "invitation-decline",
        "POST",
        lambda w: f"/invitations/{w.own_invitation.pk}/decline/",
        Need.OWN,
        ok=204,
        outside=404,
        probe=_state(Invitation, lambda w: w.own_invitation.pk, "pk"),
    ),
    # API tokens: a user's own, whoever he is
    _list("token-list", "/tokens/", ApiToken, lambda w: w.token.pk, visible_to="owner"),
    _api(
        "token-list",
        "POST",
        lambda w: "/tokens/",
        Need.LOGIN,
        kind="other",
        body=lambda w: {"name": "alpha-new-token"},
        probe=_count(ApiToken, name="alpha-new-token"),
    ),
    _api("token-detail", "GET", lambda w: f"/tokens/{w.token.pk}/", Need.OWN),
    _api(
        "token-detail",
        "DELETE",
        lambda w: f"/tokens/{w.token.pk}/",
        Need.OWN,
        probe=_state(ApiToken, lambda w: w.token.pk, "pk"),
    ),
    _api(
        "api-token",
        "POST",
        lambda w: "/auth/token/",
        Need.PUBLIC,
        kind="other",
        ok=200,
        body=lambda w: {"username": OWNER, "password": TEST_PASSWORD},
        probe=_count(ApiToken, name="auth/token"),
    ),
    # master tables, the API's root and its unknown paths
    *[
        op
        for prefix, model in MASTER_TABLES.items()
        for op in (
            _list(
                f"{prefix}-list",
                f"/master/{prefix}/",
                model,
                lambda w, model=model: model.objects.order_by("pk").first().pk,
                visible_to="all",
            ),
            _api(
                f"{prefix}-detail",
                "GET",
                lambda w, model=model, prefix=prefix: (
                    f"/master/{prefix}/{model.objects.order_by('pk').first().pk}/"
                ),
                Need.LOGIN,
                kind="other",
            ),
        )
    ],
    _api("api-root", "GET", lambda w: "/", Need.LOGIN, kind="other"),
    Op(
        "api",
        r"^api/v1/(?P<rest>[\s\S]*)$",
        "GET",
        lambda w: f"{API}/no-such-resource/",
        Need.PUBLIC,
        kind="other",
        ok=404,
    ),
]

JOB_FORM = {
    "name": "alpha_paged_job",
    "job_type": JOB_TYPE,
    "max_retries": 3,
    "lease_seconds": 3600,
    "timezone": "UTC",
    "step-TOTAL_FORMS": 1,
    "step-INITIAL_FORMS": 0,
    "step-MIN_NUM_FORMS": 1,
    "step-MAX_NUM_FORMS": 1000,
    "step-0-name": "a",
    "step-0-kind": STEP_TYPE,
}

PAGE_TABLE = [
    _page(
        "ui-dashboard",
        "GET",
        lambda w: "/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha_orders",
    ),
    _page("ui-job", "GET", lambda w: f"/jobs/{w.job.pk}/", Need.VIEWER),
    _page(
        "ui-job-action",
        "POST",
        lambda w: f"/jobs/{w.job.pk}/run/",
        Need.DEVELOPER,
        probe=lambda w: (_runs_of(w.job), len(w.sent)),
        label="run",
    ),
    _page(
        "ui-job-action",
        "POST",
        lambda w: f"/jobs/{w.live_job.pk}/terminate/",
        Need.DEVELOPER,
        probe=_run_state("live_run"),
        label="terminate",
    ),
    _page(
        "ui-job-action",
        "POST",
        lambda w: f"/jobs/{w.job.pk}/pause/",
        Need.DEVELOPER,
        probe=_schedule("job", "enabled"),
        label="pause",
    ),
    _page(
        "ui-job-action",
        "POST",
        lambda w: f"/jobs/{w.paused_job.pk}/resume/",
        Need.DEVELOPER,
        probe=_schedule("paused_job", "enabled"),
        label="resume",
    ),
    # A developer of another team may register jobs, in his own team's applications only.
    _page("ui-job-new", "GET", lambda w: "/jobs/new/", Need.DEVELOPER_ANYWHERE, outside=200),
    _page(
        "ui-job-new",
        "POST",
        lambda w: "/jobs/new/",
        Need.DEVELOPER_ANYWHERE,
        kind="create",
        outside=200,  # the form again: team A's application is not among his choices
        body=lambda w: {**JOB_FORM, "application": w.app.pk},
        probe=_count(Process, name="alpha_paged_job"),
    ),
    _page(
        "ui-job-from-template",
        "GET",
        lambda w: "/jobs/from-template/",
        Need.DEVELOPER_ANYWHERE,
        outside=200,
    ),
    _page(
        "ui-job-from-template",
        "POST",
        lambda w: "/jobs/from-template/",
        Need.DEVELOPER_ANYWHERE,
        kind="create",
        outside=200,  # the form again: neither team A's template nor its application offered
        body=lambda w: {
            "template": w.template.pk,
            "application": w.app.pk,
            "name": "alpha_paged_from_tmpl",
            "timezone": "UTC",
        },
        probe=_count(Process, name="alpha_paged_from_tmpl"),
    ),
    _page(
        "ui-job-schedule",
        "POST",
        lambda w: f"/jobs/{w.job.pk}/schedule/",
        Need.DEVELOPER,
        body=lambda w: {"every_seconds": 5, "timezone": "UTC"},
        probe=_schedule("job", "every_seconds"),
    ),
    _page("ui-job-edit", "GET", lambda w: f"/jobs/{w.job.pk}/edit/", Need.DEVELOPER),
    _page(
        "ui-job-edit",
        "POST",
        lambda w: f"/jobs/{w.job.pk}/edit/",
        Need.DEVELOPER,
        body=lambda w: {
            "name": "alpha_orders",
            "description": "edited on its page",
            "max_retries": 3,
            "lease_seconds": 3600,
            "step-TOTAL_FORMS": 1,
            "step-INITIAL_FORMS": 1,
            "step-0-step": w.step.pk,
            "step-0-properties": "group.alpha_key = edited",
            "new-TOTAL_FORMS": 0,
            "new-INITIAL_FORMS": 0,
        },
        probe=lambda w: (
            Process.objects.get(pk=w.job.pk).description,
            Property.objects.get(pk=w.property.pk).value,
        ),
    ),
    # The plan pages: without the request's values, a form (nothing starts).
    *(
        _page(route, method, path, Need.DEVELOPER, ok=200)
        for route, path in (
            ("ui-job-backfill", lambda w: f"/jobs/{w.job.pk}/backfill/"),
            ("ui-job-catch-up", lambda w: f"/jobs/{w.job.pk}/catch-up/"),
            ("ui-step-rewind", lambda w: f"/steps/{w.step.pk}/rewind/"),
            ("ui-batch-reprocess", lambda w: f"/batches/{w.batch.pk}/reprocess/?preview=1"),
            ("ui-file-reprocess", lambda w: f"/files/{w.file.pk}/reprocess/?preview=1"),
            ("ui-step-reset-marker", lambda w: f"/steps/{w.scan_step.pk}/reset-marker/?key="),
        )
        for method in ("GET",)
    ),
    _page(
        "ui-step-reset-marker",
        "POST",
        lambda w: f"/steps/{w.scan_step.pk}/reset-marker/",
        Need.DEVELOPER,
        body=lambda w: {"key": "a"},
        probe=_state(ScanState, lambda w: w.scan_step.scan_state.pk, "marker"),
    ),
    _page(
        "ui-template-save",
        "POST",
        lambda w: f"/jobs/{w.job.pk}/save-template/",
        Need.DEVELOPER,
        body=lambda w: {"name": "alpha_copy"},
        probe=_count(ProcessTemplate, name="alpha_copy"),
    ),
    _page(
        "ui-templates",
        "GET",
        lambda w: "/templates/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha_tmpl",
    ),
    _page(
        "ui-template-delete",
        "POST",
        lambda w: f"/templates/{w.template.pk}/delete/",
        Need.ADMIN,
        probe=_state(ProcessTemplate, lambda w: w.template.pk, "deleted"),
    ),
    _page(
        "ui-teams",
        "GET",
        lambda w: "/teams/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "team-alpha",
    ),
    _page(
        "ui-teams",
        "POST",
        lambda w: "/teams/",
        Need.OWN,
        body=lambda w: {"action": "accept", "invitation": w.own_invitation.pk},
        probe=_count(Membership, user__username=OWNER, team__name="team-charlie"),
        label="accept",
    ),
    _page(
        "ui-teams",
        "POST",
        lambda w: "/teams/",
        Need.OWN,
        body=lambda w: {"action": "decline", "invitation": w.own_invitation.pk},
        probe=_state(Invitation, lambda w: w.own_invitation.pk, "pk"),
        label="decline",
    ),
    _page("ui-team", "GET", lambda w: f"/teams/{w.team.pk}/", Need.VIEWER),
    _page(
        "ui-team",
        "POST",
        lambda w: f"/teams/{w.team.pk}/",
        Need.SUPERUSER,  # directly, without the user's consent; a team admin invites
        body=lambda w: {"action": "add", "username": "newcomer", "role": "viewer"},
        probe=_count(Membership, user__username="newcomer"),
        label="add",
    ),
    _page(
        "ui-team",
        "POST",
        lambda w: f"/teams/{w.team.pk}/",
        Need.ADMIN,
        body=lambda w: {"action": "invite", "username": "newcomer", "role": "viewer"},
        probe=_count(Invitation, username="newcomer"),
        label="invite",
    ),
    _page(
        "ui-team",
        "POST",
        lambda w: f"/teams/{w.team.pk}/",
        Need.ADMIN,
        body=lambda w: {"action": "cancel", "invitation": w.invitation.pk},
        probe=_state(Invitation, lambda w: w.invitation.pk, "pk"),
        label="cancel",
    ),
    _page(
        "ui-team",
        "POST",
        lambda w: f"/teams/{w.team.pk}/",
        Need.ADMIN,
        body=lambda w: {"action": "role", "membership": w.membership.pk, "role": "developer"},
        probe=_state(Membership, lambda w: w.membership.pk, "role"),
        label="role",
    ),
    _page(
        "ui-team",
        "POST",
        lambda w: f"/teams/{w.team.pk}/",
        Need.ADMIN,
        body=lambda w: {"action": "remove", "membership": w.membership.pk},
        probe=_state(Membership, lambda w: w.membership.pk, "pk"),
        label="remove",
    ),
    _page("ui-team-alerts", "GET", lambda w: f"/teams/{w.team.pk}/alerts/", Need.VIEWER),
    _page(
        "ui-team-alerts",
        "POST",
        lambda w: f"/teams/{w.team.pk}/alerts/",
        Need.ADMIN,
        body=lambda w: {"action": "add", "channel": "email", "target": "page@example.com"},
        probe=_count(Destination, target="page@example.com"),
        label="add",
    ),
    _page(
        "ui-team-alerts",
        "POST",
        lambda w: f"/teams/{w.team.pk}/alerts/",
        Need.ADMIN,
        body=lambda w: {"action": "remove", "destination": w.destination.pk},
        probe=_state(Destination, lambda w: w.destination.pk, "pk"),
        label="remove",
    ),
    _page(
        "ui-tokens",
        "GET",
        lambda w: "/tokens/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha-own-token",
        visible_to="owner",
    ),
    _page(
        "ui-tokens",
        "POST",
        lambda w: "/tokens/",
        Need.LOGIN,
        kind="other",
        ok=200,  # the page again, showing the new key once
        body=lambda w: {"name": "alpha-paged-token", "days": 30},
        probe=_count(ApiToken, name="alpha-paged-token"),
    ),
    _page("ui-token-revoke", "GET", lambda w: f"/tokens/{w.token.pk}/revoke/", Need.OWN),
    _page(
        "ui-token-revoke",
        "POST",
        lambda w: f"/tokens/{w.token.pk}/revoke/",
        Need.OWN,
        probe=_state(ApiToken, lambda w: w.token.pk, "pk"),
    ),
    _page("ui-run", "GET", lambda w: f"/runs/{w.live_run}/", Need.VIEWER),
    _page("ui-run-live", "GET", lambda w: f"/runs/{w.live_run}/live/", Need.VIEWER),
    _page("ui-run-log", "GET", lambda w: f"/runs/{w.live_run}/log/", Need.VIEWER),
    _page("ui-run-retry", "POST", lambda w: f"/runs/{w.live_run}/retry/", Need.DEVELOPER),
    _page(
        "ui-runs",
        "GET",
        lambda w: "/runs/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: f"/runs/{w.live_run}/",
    ),
    _page(
        "ui-dashboard-live",
        "GET",
        lambda w: "/dashboard/live/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha_orders",
    ),
    _page(
        "ui-pipeline",
        "GET",
        lambda w: "/pipeline/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha_orders",
    ),
    _page(
        "ui-queue",
        "GET",
        lambda w: "/queue/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha_orders_s1",
    ),
    _page(
        "ui-queue",
        "GET",
        lambda w: "/queue/?table=archive",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha_orders_s1",
        label="archive",
    ),
    *[
        _page(
            "ui-queue-action",
            "GET",
            lambda w, action=action: f"/queue/{w.queue_row.pk}/{action}/",
            Need.DEVELOPER,
            label=f"confirm {action}",
        )
        for action in ("requeue", "discard", "retry")
    ],
    *[
        _page(
            "ui-queue-action",
            "POST",
            lambda w, action=action: f"/queue/{w.queue_row.pk}/{action}/",
            Need.DEVELOPER,
            body=lambda w: {"reason": "discarded by the matrix"},
            probe=_state(BatchConsumpQueue, lambda w: w.queue_row.pk, "batch_state_id"),
            label=action,
        )
        for action in ("requeue", "discard", "retry")
    ],
    _page(
        "ui-queue-bulk",
        "POST",
        lambda w: "/queue/bulk/",
        Need.DEVELOPER,
        ok=200,  # the confirmation: nothing changes yet
        body=lambda w: {"action": "discard", "ids": [w.queue_row.pk]},
        probe=None,
        label="confirm",
    ),
    *[
        _page(
            "ui-queue-bulk",
            "POST",
            lambda w: "/queue/bulk/",
            Need.DEVELOPER,
            body=lambda w, action=action: {
                "action": action,
                "ids": [w.queue_row.pk],
                "confirm": "yes",
                "reason": "discarded by the matrix",
            },
            probe=_state(BatchConsumpQueue, lambda w: w.queue_row.pk, "batch_state_id"),
            label=action,
        )
        for action in ("requeue", "discard")
    ],
    _page(
        "ui-batches",
        "GET",
        lambda w: "/batches/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: f"/batches/{w.batch.pk}/",
    ),
    _page("ui-batch", "GET", lambda w: f"/batches/{w.batch.pk}/", Need.VIEWER),
    _page(
        "ui-operations",
        "GET",
        lambda w: "/operations/",
        Need.LOGIN,
        kind="list",
        listed=lambda w: f"/operations/{w.operation.pk}/",
    ),
    _page("ui-operation", "GET", lambda w: f"/operations/{w.operation.pk}/", Need.VIEWER),
    _page("ui-operation-live", "GET", lambda w: f"/operations/{w.operation.pk}/live/", Need.VIEWER),
    _page("ui-table", "GET", lambda w: f"/tables/{w.table.pk}/", Need.VIEWER),
    _page(
        "ui-table-preview",
        "POST",
        lambda w: f"/tables/{w.table.pk}/preview/",
        Need.VIEWER,
    ),
    _page(
        "ui-table-preview-live",
        "GET",
        lambda w: f"/tables/{w.table.pk}/preview/{w.table.partitions.get().pk}/live/",
        Need.VIEWER,
    ),
    _page(
        "ui-lineage",
        "GET",
        lambda w: "/lineage/?q=alpha",
        Need.LOGIN,
        kind="list",
        listed=lambda w: "alpha_db.src",
    ),
    _page("ui-lineage-node", "GET", lambda w: f"/lineage/nodes/{w.src_node.pk}/", Need.VIEWER),
    # accounts (Django's views), health, the API's schema and documentation
    _page("login", "GET", lambda w: "/accounts/login/", Need.PUBLIC, kind="other"),
    # An operator's endpoint: the test client calls from 127.0.0.1, inside the default
    # BDRE_METRICS_ALLOW (tests/bdre/test_metrics.py has the refusals).
    _page("metrics", "GET", lambda w: "/metrics", Need.PUBLIC, kind="other"),
    _page("logout", "POST", lambda w: "/accounts/logout/", Need.PUBLIC, kind="other", ok=TO_LOGIN),
    _page(
        "password_change", "GET", lambda w: "/accounts/password_change/", Need.LOGIN, kind="other"
    ),
    _page(
        "password_change_done",
        "GET",
        lambda w: "/accounts/password_change/done/",
        Need.LOGIN,
        kind="other",
    ),
    _page(
        "password_reset", "GET", lambda w: "/accounts/password_reset/", Need.PUBLIC, kind="other"
    ),
    _page(
        "password_reset_done",
        "GET",
        lambda w: "/accounts/password_reset/done/",
        Need.PUBLIC,
        kind="other",
    ),
    _page(
        "password_reset_confirm",
        "GET",
        lambda w: "/accounts/reset/MQ/not-a-token/",
        Need.PUBLIC,
        kind="other",
    ),
    _page(
        "password_reset_complete",
        "GET",
        lambda w: "/accounts/reset/done/",
        Need.PUBLIC,
        kind="other",
    ),
    _page("healthz", "GET", lambda w: "/healthz", Need.PUBLIC, kind="other"),
    _page("favicon", "GET", lambda w: "/favicon.ico", Need.PUBLIC, kind="other", ok=302),
    _page("api-schema", "GET", lambda w: "/api/schema/", Need.PUBLIC, kind="other"),
    _page("api-docs", "GET", lambda w: "/api/docs/", Need.PUBLIC, kind="other"),
]

# --- the admin: installation superusers only ------------------------------------------------

# Rows only the system writes: shown, never added or deleted by hand (bdre/admin.py).
ADMIN_READ_ONLY = {
    "processes.execstatus",
    "processes.workflowtype",
    "processes.processtype",
    "processes.instanceexec",
    "processes.operation",
    "batches.batchstatus",
    "batches.batch",
    "batches.batchconsumpqueue",
    "batches.archiveconsumpqueue",
    "batches.eventmanifest",
    "batches.catalogstate",
    "batches.partition",
    "batches.partitionpreview",
    "lineage.lineagenodetype",
    "lineage.lineagequerytype",
    "alerts.alert",
    "alerts.alertgate",
}
# A token is issued by its owner; an invitation is sent by a team admin and answered by its user.
ADMIN_NO_ADD = ADMIN_READ_ONLY | {"bdre.apitoken", "bdre.invitation"}


def _owned_by(model: type, team: Group) -> Q:
    """Rows of ``model`` owned by ``team``, through its ``team_lookup``."""
    lookup = model.team_lookup
    condition = Q()
    for path in (lookup,) if isinstance(lookup, str) else lookup:
        condition |= Q(**{path: team})
    return condition


def _admin_object(w: W, model: type) -> Any:
    rows = model._default_manager.order_by("pk")
    if model is Group:
        rows = rows.filter(pk=w.team.pk)
    elif hasattr(model, "team_lookup"):
        rows = rows.filter(_owned_by(model, w.team))
    found = rows.first()
    assert found is not None, f"the world has no {model._meta.label} to open in the admin"
    return found


def _admin_url(model: type, action: str) -> Builder:
    opts = model._meta

    def url(w: W) -> str:
        args = [] if action in ("changelist", "add") else [quote(_admin_object(w, model).pk)]
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_{action}", args=args)

    return url


def _admin_rows() -> list[Op]:
    rows = []
    for model in admin.site._registry:
        opts = model._meta
        label = opts.label_lower
        for action in ("changelist", "add", "change", "delete", "history"):
            refused_by_admin = (action == "add" and label in ADMIN_NO_ADD) or (
                action == "delete" and label in ADMIN_READ_ONLY
            )
            rows.append(
                Op(
                    "admin",
                    f"admin:{opts.app_label}_{opts.model_name}_{action}",
                    "GET",
                    _admin_url(model, action),
                    Need.SUPERUSER,
                    ok=403 if refused_by_admin else 200,
                )
            )
        # /admin/<app>/<model>/<id>/ sends the superuser on to the change page
        rows.append(
            Op(
                "admin",
                f"admin/{opts.app_label}/{opts.model_name}/<path:object_id>/",
                "GET",
                lambda w, model=model: _admin_url(model, "change")(w).removesuffix("change/"),
                Need.SUPERUSER,
                ok=302,
            )
        )
    return rows


ADMIN_TABLE = [
    *_admin_rows(),
    Op("admin", "admin:index", "GET", lambda w: "/admin/", Need.SUPERUSER),
    Op(
        "admin",
        "admin:login",
        "GET",
        lambda w: "/admin/login/",
        Need.PUBLIC,
        kind="other",
        special={"superuser": 302},  # signed in already: on to the index
    ),
    # Refused, the log-out sends to the admin's index (which sends to its log-in page).
    Op(
        "admin",
        "admin:logout",
        "POST",
        lambda w: "/admin/logout/",
        Need.SUPERUSER,
        ok=TO_LOGIN,  # signed out, on to the log-in page (LOGOUT_REDIRECT_URL)
        refused=TO_ADMIN_INDEX,
        outside=TO_ADMIN_INDEX,
    ),
    Op(
        "admin", "admin:password_change", "GET", lambda w: "/admin/password_change/", Need.SUPERUSER
    ),
    Op(
        "admin",
        "admin:password_change_done",
        "GET",
        lambda w: "/admin/password_change/done/",
        Need.SUPERUSER,
    ),
    Op(
        "admin",
        "admin:auth_user_password_change",
        "GET",
        lambda w: f"/admin/auth/user/{w.users['viewer'].pk}/password/",
        Need.SUPERUSER,
    ),
    Op(
        "admin",
        "admin:autocomplete",
        "GET",
        lambda w: "/admin/autocomplete/?app_label=bdre&model_name=membership&field_name=user",
        Need.SUPERUSER,
    ),
    Op("admin", "admin:jsi18n", "GET", lambda w: "/admin/jsi18n/", Need.SUPERUSER),
    Op(
        "admin",
        "admin:view_on_site",
        "GET",
        lambda w: f"/admin/r/{ContentType.objects.get_for_model(Group).pk}/{w.team.pk}/",
        Need.SUPERUSER,
        ok=404,  # no model of BDRE has a page of its own outside the admin
    ),
    Op("admin", "admin:app_list", "GET", lambda w: "/admin/processes/", Need.SUPERUSER),
    Op(
        "admin",
        "admin/(?P<url>.*)$",
        "GET",
        lambda w: "/admin/no-such-page/",
        Need.SUPERUSER,
        ok=404,
    ),
    # A team admin making himself (or anyone) a member through the admin: superusers only.
    Op(
        "admin",
        "admin:bdre_membership_add",
        "POST",
        lambda w: "/admin/bdre/membership/add/",
        Need.SUPERUSER,
        body=lambda w: {"user": w.newcomer.pk, "team": w.team.pk, "role": "admin"},
        probe=_count(Membership, user__username="newcomer"),
        label="escalate",
    ),
]

TABLE: list[Op] = [*API_TABLE, *PAGE_TABLE, *ADMIN_TABLE]


# --- what each actor gets -------------------------------------------------------------------


def expected(op: Op, actor: Actor) -> int | str:
    if actor.name in op.special:
        return op.special[actor.name]
    if actor.anonymous:
        if op.need is Need.PUBLIC:
            return op.ok
        return {"api": 401, "page": TO_LOGIN, "admin": op.refused}[op.area]
    if op.need in (Need.PUBLIC, Need.LOGIN):
        return op.ok
    if op.need is Need.OWN:
        return op.ok if actor.name == OWNER else op.outside
    if actor.superuser:
        return op.ok
    if op.need in (Need.STAFF, Need.SUPERUSER):
        return op.refused if actor.team == "A" else op.outside
    if actor.team == "A":
        return op.ok if RANK[actor.role] >= LEAST[op.need] else op.refused
    if op.need is Need.DEVELOPER_ANYWHERE:
        return op.outside if actor.team == "B" else op.refused
    return op.outside


def _client(world: W, op: Op, actor: Actor) -> Client:
    if op.area == "api":
        client = APIClient()
        if not actor.anonymous:
            client.credentials(HTTP_AUTHORIZATION=f"Token {world.keys[actor.name]}")
        return client
    client = Client()
    if not actor.anonymous:
        client.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[actor.name]
    return client


def _send(client: Client, op: Op, path: str, body: dict | None):
    call = getattr(client, op.method.lower())
    if op.area == "api" and op.method != "GET":
        return call(path, body if body is not None else {}, format="json")
    if op.method == "GET":
        return call(path)
    return call(path, body or {})


def _check_status(response, expect: int | str, what: str) -> None:
    location = response.get("Location", "")
    if isinstance(expect, str):
        target = LOCATIONS.get(expect, "/admin/")
        assert response.status_code == 302, f"{what}: {response.status_code}, not {expect}"
        if expect == TO_ADMIN_INDEX:
            assert location == target, f"{what}: sent to {location}, not {expect}"
        else:
            assert location.startswith(target), f"{what}: sent to {location}, not {expect}"
        return
    detail = getattr(response, "content", b"")[:300]
    assert response.status_code == expect, f"{what}: {response.status_code}, not {expect}: {detail}"
    if expect == 302:
        assert not location.startswith(tuple(LOCATIONS.values())), f"{what}: sent to {location}"


def _sees(op: Op, actor: Actor) -> bool:
    if op.visible_to == "all":
        return True
    if op.visible_to == "owner":
        return actor.name == OWNER
    return actor.team == "A" or actor.superuser


def _check_list(world: W, op: Op, actor: Actor, response) -> None:
    marker = op.listed(world)
    what = f"{op.id} as {actor.name}"
    if op.area == "api":
        body = response.json()
        rows = body["results"] if isinstance(body, dict) else body
        ids = {row["id"] for row in rows}
        assert (marker in ids) is _sees(op, actor), f"{what}: team A's row {marker} in {ids}"
        if op.visible_to == "team" and not _sees(op, actor):
            theirs = set(
                op.model._default_manager.filter(_owned_by(op.model, world.team)).values_list(
                    "pk", flat=True
                )
                if op.model is not Group
                else [world.team.pk, world.spare_team.pk]
            )
            assert not ids & theirs, f"{what}: shows rows of team A {ids & theirs}"
            if actor.team is None:
                assert rows == [], f"{what}: a user in no team sees {ids}"
    else:
        shown = marker in response.content.decode()
        assert shown is _sees(op, actor), f"{what}: {marker!r} shown: {shown}"


def _runs_of(job) -> int:
    return InstanceExec.objects.filter(process=job).count()


@pytest.mark.parametrize("op", TABLE, ids=[op.id for op in TABLE])
def test_the_matrix(world, sent, django_capture_on_commit_callbacks, subtests, op):
    """The row's operation as each actor, a subtest each, in a savepoint of its own rolled
    back after it (the test's own savepoint holds them all): what one actor wrote is gone
    before the next sends. Eight subtests, not eight tests: pytest's and pytest-django's
    set-up and teardown of a test would take a fifth of the module's CPU (docs/testing.md,
    "Helpers and fixtures"). What that teardown checked of each test, each case checks."""
    for actor in ACTORS:
        with subtests.test(msg=f"as {actor.name}"):
            sent.clear()
            # log-in failures and throttle counts: one actor's must not refuse the next
            cache.clear()
            with rolled_back():
                _case(world, sent, django_capture_on_commit_callbacks, op, actor)


def _case(world: W, sent: list, capture_on_commit, op: Op, actor: Actor) -> None:
    world.sent = sent  # the probes count what was queued
    expect = expected(op, actor)
    path = op.path(world)
    body = op.body(world) if op.body else None
    before = op.probe(world) if op.probe else None
    with capture_on_commit(execute=True):
        response = _send(_client(world, op, actor), op, path, body)
    what = f"{op.method} {path} as {actor.name} (needs {op.need.value})"
    _check_status(response, expect, what)
    if op.kind == "list" and expect == op.ok and op.listed:
        _check_list(world, op, actor, response)
    if op.probe:
        after = op.probe(world)
        if expect == op.ok:
            assert after != before, f"{what}: answered {expect} and changed nothing ({before})"
        else:
            assert after == before, f"{what}: refused, but changed {before} into {after}"


# --- every route has a row ------------------------------------------------------------------


def _routes(patterns, prefix: str = "", namespace: str = "") -> set[str]:
    """Every URL pattern, by its name (with its namespace), or by its pattern if unnamed."""
    found: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = ":".join(n for n in (namespace, pattern.namespace or "") if n)
            found |= _routes(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            if pattern.name:
                found.add(f"{namespace}:{pattern.name}" if namespace else pattern.name)
            else:
                found.add(prefix + str(pattern.pattern))
    return found


def test_every_route_has_a_row():
    declared = {op.route for op in TABLE}
    missing = sorted(_routes(get_resolver().url_patterns) - declared)
    assert not missing, f"routes without a row in the permission matrix: {missing}"


def test_every_method_of_every_viewset_has_a_row():
    declared = {(op.route, op.method) for op in TABLE if op.area == "api"}
    missing = []
    for _prefix, viewset, basename in router.registry:
        allowed = {m.lower() for m in viewset.http_method_names}
        for route in router.get_routes(viewset):
            name = route.name.format(basename=basename)
            for method in router.get_method_map(viewset, route.mapping):
                public = method in allowed and method not in ("head", "options")
                if public and (name, method.upper()) not in declared:
                    missing.append(f"{method.upper()} {name}")
    assert not missing, f"API operations without a row in the permission matrix: {missing}"


def test_each_row_is_one_operation():
    ids = [op.id for op in TABLE]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


# --- lists filtered by a row of team A ------------------------------------------------------


def _filters_naming_team_rows() -> list[tuple[str, str, str, type]]:
    """Every filter of an API list that names a row of a team (or a team) by id: (route,
    path, parameter, model), from the viewsets' filtersets."""
    from django_filters.filters import QuerySetRequestMixin
    from django_filters.filterset import filterset_factory
    from django_filters.rest_framework import FilterSet

    cases = []
    for prefix, viewset, basename in router.registry:
        filterset = getattr(viewset, "filterset_class", None)
        fields = getattr(viewset, "filterset_fields", None)
        if filterset is None and fields:
            model = viewset.serializer_class.Meta.model
            filterset = filterset_factory(model, filterset=FilterSet, fields=fields)
        for name, found in (filterset.base_filters if filterset else {}).items():
            queryset = getattr(found, "queryset", None)
            if not isinstance(found, QuerySetRequestMixin) or queryset is None:
                continue
            model = queryset.model
            if model is Group or hasattr(model, "team_lookup"):
                cases.append((f"{basename}-list", f"/{prefix}/", name, model))
    return cases


FILTERS = _filters_naming_team_rows()
OUTSIDERS = [a for a in ACTORS if a.team != "A" and not a.anonymous and not a.superuser]


def _unused_id(model: type) -> int:
    return (model._default_manager.order_by("-pk").values_list("pk", flat=True).first()) + 10**6


@pytest.mark.parametrize(
    ("route", "path", "param", "model"), FILTERS, ids=[f"{r}?{p}" for r, _, p, _ in FILTERS]
)
def test_a_filter_naming_a_row_of_team_a_answers_as_for_no_row(world, route, path, param, model):
    """A user outside team A who filters a list by the id of one of team A's rows learns
    nothing: the answer is the one for an id that names no row at all (DESIGN.md section 9:
    another team's row is answered as unknown), for each user outside team A."""
    theirs, nobody = _admin_object(world, model).pk, _unused_id(model)
    differ = {}
    for actor in OUTSIDERS:
        client = _client(world, Op("api", route, "GET", lambda w: "", Need.LOGIN), actor)
        answers = [client.get(f"{API}{path}?{param}={pk}") for pk in (theirs, nobody)]
        got = [(a.status_code, a.json()) for a in answers]
        if got[0] != got[1]:
            differ[actor.name] = got
    assert not differ, (
        f"GET {API}{path}?{param}=<id>: team A's {model._meta.label} {theirs} and an id of no "
        f"row are told apart: {differ}"
    )


# The pages that list through the same filtersets: the choice refused is shown on the page.
PAGE_FILTERS = [
    ("/queue/?process", Process, lambda w: w.step.pk),
    ("/queue/?table=archive&process", Process, lambda w: w.step.pk),
    ("/batches/?source_instance_exec", InstanceExec, lambda w: w.live_run),
]


@pytest.mark.parametrize(
    ("path", "model", "theirs"), PAGE_FILTERS, ids=[p for p, _, _ in PAGE_FILTERS]
)
def test_a_page_filter_naming_a_row_of_team_a_answers_as_for_no_row(world, path, model, theirs):
    pks = (theirs(world), _unused_id(model))
    differ = {}
    for actor in OUTSIDERS:
        client = _client(world, Op("page", "", "GET", lambda w: "", Need.LOGIN), actor)
        answers = [client.get(f"{path}={pk}") for pk in pks]
        got = [(a.status_code, "available choices" in a.content.decode()) for a in answers]
        if got[0] != got[1]:
            differ[actor.name] = got
    assert not differ, (
        f"{path}=<id>: team A's {model._meta.label} {pks[0]} and an id of no row are told "
        f"apart (status, 'not one of the available choices' shown): {differ}"
    )
