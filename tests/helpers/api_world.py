"""The API's world for the OpenAPI tests (tests/bdre/test_openapi.py, test_openapi_fuzz.py):
a team that owns a little of everything the API serves."""

from __future__ import annotations

from django.contrib.auth.models import Group

from batches.models import (
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    BatchState,
    File,
)
from bdre.api_urls import MASTER_TABLES
from bdre.models import Membership
from lineage.extract import extract, record
from lineage.models import LineageNode, LineageQuery, LineageRelation
from processes import orchestrator, registry, schedules
from processes.models import (
    BusDomain,
    InstanceExec,
    Process,
    ProcessLog,
    ProcessTemplate,
    Property,
    Server,
)
from tests.helpers.api import api_as
from tests.helpers.factories import (
    FileFactory,
    JobFactory,
    LineageQueryFactory,
    QueueRowFactory,
    ServerFactory,
    StepFactory,
)
from tests.helpers.jobs import build_job, callable_step

# The ids of the rows in the fuzzed user's world, per resource: filled by build_world, read
# when a test draws an id.
REAL_IDS: dict[str, list[int]] = {}
ID_MODELS = {
    "applications": BusDomain,
    "processes": Process,
    "templates": ProcessTemplate,
    "properties": Property,
    "runs": InstanceExec,
    "logs": ProcessLog,
    "batches": Batch,
    "queue": BatchConsumpQueue,
    "archive": ArchiveConsumpQueue,
    "files": File,
    "servers": Server,
    "lineage/queries": LineageQuery,
    "lineage/nodes": LineageNode,
    "lineage/relations": LineageRelation,
    "teams": Group,
    "memberships": Membership,
    **{f"master/{prefix}": model for prefix, model in MASTER_TABLES.items()},
    "graph/table": LineageNode,
    "graph/column": LineageNode,
    "graph/process": Process,
    "graph/batch": Batch,
}


def resource_of(path: str, parameters: dict) -> str:
    if "{kind}" in path:
        return f"graph/{parameters.get('kind')}"
    return path.removeprefix("/api/v1/").split("/{id}")[0]


def real_id(resource: str, index: int) -> int:
    ids = REAL_IDS.get(resource) or [0]
    return ids[index % len(ids)]


def build_world(team) -> str:
    """A developer's token, and a team that owns a little of everything the API serves: a
    job that ran (runs, logs, batches), a job downstream of it that consumed one of its
    batches (archive rows) and has another queued, schedules (timed and on upstream only),
    a template, a file, a server and the lineage of a query; and a job of another team."""
    sleep = "tests.processes.callables.sleep"
    steps = [callable_step(name, sleep) for name in ("clicks_load", "clicks_report")]
    clicks = build_job(team, "clicks", steps)
    sessions = build_job(
        team, "sessions", [callable_step("sessions_build", sleep, upstream=[clicks])]
    )
    outcome = orchestrator.run_job(clicks.pk)
    orchestrator.run_job(sessions.pk)  # consumes the batch of clicks: archive rows
    orchestrator.run_job(clicks.pk)  # and queues another for sessions
    ProcessLog.objects.create(
        process=clicks, instance_exec_id=outcome.instance_exec_id, message="started"
    )
    schedules.set_schedule(clicks.pk, schedules.Schedule(every_seconds=600))
    schedules.set_schedule(
        JobFactory(bus_domain=team.application).pk, schedules.Schedule(on_upstream=True)
    )
    registry.template_from_job(clicks, name="clicks_template")
    load = clicks.steps.get(name="clicks_load")
    QueueRowFactory(process=load, batch_state_id=BatchState.DISCARDED)
    FileFactory(batch_id=outcome.target_batch_id)
    ServerFactory(team=team.group)
    query = LineageQueryFactory(process=load)
    record(
        query,
        extract(
            "SELECT a, SUM(b) AS total FROM lake.src GROUP BY a",
            schema={"lake": {"src": {"a": "int", "b": "int"}}},
            target="lake.out",
        ),
    )
    StepFactory(parent=JobFactory(bus_domain=team.other_application))
    token = api_as(team.developer)._credentials["HTTP_AUTHORIZATION"]
    for resource, model in ID_MODELS.items():
        REAL_IDS[resource] = list(
            model._default_manager.order_by("pk").values_list("pk", flat=True)
        )
    return token
