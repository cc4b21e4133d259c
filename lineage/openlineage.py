"""OpenLineage run events: every job run and step run says START, then COMPLETE or FAIL,
with the datasets it read and wrote and, for SQL steps, the column lineage of its output,
so that Marquez or any OpenLineage consumer can follow BDRE's pipelines.

Events go to a file (JSON lines) and/or an HTTP endpoint (``OPENLINEAGE_FILE``,
``OPENLINEAGE_URL``). They are built and sent after the lifecycle's transaction commits, so
they describe committed state and a rolled-back call sends nothing; a consumer that is down
is logged, never a reason for a run to fail.

A job is an OpenLineage job named after it, in its team's namespace
(``<OPENLINEAGE_NAMESPACE>.team-<team id>``: names are per team, so two teams' ``orders`` are
two jobs); a step is ``job.step`` with the job's run as its parent. Run ids are UUIDs
derived from ``OPENLINEAGE_NAMESPACE`` and the run's id, so that the START and the end of a
run (written by different processes) agree without storing anything.
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import urllib.parse
import urllib.request
import uuid
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.db import transaction

from batches import tables
from batches.models import ArchiveConsumpQueue, BatchConsumpQueue, File, ScanState
from lineage.extract import edge_functions, struct_columns
from lineage.models import LineageNode, LineageRelation
from processes.models import ExecState, InstanceExec, Process

log = logging.getLogger(__name__)

PRODUCER = "https://github.com/bdre/bdre"
SPEC = "https://openlineage.io/spec"
RUN_EVENT_SCHEMA = f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACET_SCHEMAS = {
    "parent": f"{SPEC}/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet",
    "errorMessage": f"{SPEC}/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
    "processing_engine": (
        f"{SPEC}/facets/1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet"
    ),
    "jobType": f"{SPEC}/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
    "sql": f"{SPEC}/facets/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
    "schema": f"{SPEC}/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
    "columnLineage": (
        f"{SPEC}/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"
    ),
    "outputStatistics": (
        f"{SPEC}/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json"
        "#/$defs/OutputStatisticsOutputDatasetFacet"
    ),
}
AGGREGATES = {"SUM", "COUNT", "AVG", "MIN", "MAX", "COLLECT_LIST", "COLLECT_SET", "FIRST", "LAST"}
EVENT_OF_STATE = {
    ExecState.SUCCESS: "COMPLETE",
    ExecState.FAILED: "FAIL",
    ExecState.KILLED: "ABORT",
}


def enabled() -> bool:
    return bool(settings.OPENLINEAGE_URL or settings.OPENLINEAGE_FILE)


def announce(run_id: int, event_type: str, error: str = "") -> None:
    """Send the run's event once the current transaction commits (now, outside of one)."""
    if enabled():
        transaction.on_commit(lambda: send(run_id, event_type, error))


def announce_end(run_id: int, state: ExecState, error: str = "") -> None:
    announce(run_id, EVENT_OF_STATE.get(state, "FAIL"), error)


def send(run_id: int, event_type: str, error: str = "") -> dict[str, Any] | None:
    """Build and deliver one event. Never raises: lineage must not fail a run."""
    try:
        event = run_event(run_id, event_type, error)
    except Exception:
        log.exception("OpenLineage: cannot build the %s event of run %s", event_type, run_id)
        return None
    deliver(event)
    return event


def deliver(event: dict[str, Any]) -> None:
    body = json.dumps(event, separators=(",", ":"), sort_keys=True)
    if settings.OPENLINEAGE_FILE:
        try:
            with open(settings.OPENLINEAGE_FILE, "a", encoding="utf-8") as out:
                # workers append concurrently: one whole line each
                fcntl.flock(out, fcntl.LOCK_EX)
                out.write(body + "\n")
        except OSError as exc:
            log.warning("OpenLineage: cannot write %s: %s", settings.OPENLINEAGE_FILE, exc)
    if settings.OPENLINEAGE_URL:
        headers = {"Content-Type": "application/json"}
        if settings.OPENLINEAGE_API_KEY:
            headers["Authorization"] = f"Bearer {settings.OPENLINEAGE_API_KEY}"
        request = urllib.request.Request(
            settings.OPENLINEAGE_URL, data=body.encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=settings.OPENLINEAGE_TIMEOUT) as answer:
                answer.read()
        except Exception as exc:  # refused, timed out, a 4xx/5xx: logged and dropped
            log.warning("OpenLineage: %s refused the event: %s", settings.OPENLINEAGE_URL, exc)


# --- the event --------------------------------------------------------------------------------


def run_uuid(run_id: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"bdre://{settings.OPENLINEAGE_NAMESPACE}/{run_id}"))


def job_name(process: Process) -> str:
    parent = process.parent if process.parent_id else None
    return f"{parent.name}.{process.name}" if parent is not None else process.name


def job_namespace(process: Process) -> str:
    """The namespace of the team's jobs: process names are unique per team only."""
    return f"{settings.OPENLINEAGE_NAMESPACE}.team-{process.bus_domain.team_id}"


def _facet(facet: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": FACET_SCHEMAS[facet], **fields}


def run_event(run_id: int, event_type: str, error: str = "") -> dict[str, Any]:
    run = InstanceExec.objects.select_related(
        "process__parent", "process__process_type", "process__bus_domain"
    ).get(pk=run_id)
    process = run.process
    namespace = job_namespace(process)
    when = run.start_ts if event_type == "START" or run.end_ts is None else run.end_ts
    run_facets: dict[str, Any] = {
        "processing_engine": _facet(
            "processing_engine", version=_version(), name="BDRE", openlineageAdapterVersion="1"
        )
    }
    if run.parent_id:
        job = process.parent
        assert job is not None  # a run with a parent run is a step's, and a step has its job
        parent = {
            "run": {"runId": run_uuid(run.parent_id)},
            "job": {"namespace": namespace, "name": job.name},
        }
        run_facets["parent"] = _facet("parent", **parent, root=parent)
    if event_type in ("FAIL", "ABORT"):
        message = error or run.error or "failed"
        run_facets["errorMessage"] = _facet(
            "errorMessage", message=message, programmingLanguage="python"
        )
    kind = process.process_type.job_kind
    job_facets: dict[str, Any] = {
        "jobType": _facet(
            "jobType",
            processingType="BATCH",
            integration="BDRE",
            jobType="TASK" if run.parent_id else "JOB",
        )
    }
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    if run.parent_id:
        query = process.property_value("sql", "query") if kind == "spark.sql" else None
        if query:
            job_facets["sql"] = _facet("sql", query=query, dialect="spark")
        inputs, outputs = _datasets(run, kind, with_statistics=event_type == "COMPLETE")
    return {
        "eventType": event_type,
        "eventTime": when.isoformat(),
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA,
        "run": {"runId": run_uuid(run.pk), "facets": run_facets},
        "job": {"namespace": namespace, "name": job_name(process), "facets": job_facets},
        "inputs": inputs,
        "outputs": outputs,
    }


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bdre")
    except PackageNotFoundError:
        return "0"


# --- datasets ---------------------------------------------------------------------------------


def _location_dataset(uri: str) -> dict[str, Any]:
    """A file or folder by the OpenLineage naming rules: ``s3://bucket`` + key, or
    ``file`` + absolute path."""
    if uri.startswith("file:"):  # file:///x, file:/x (as Spark writes it), file://host/x
        return {"namespace": "file", "name": urllib.parse.urlparse(uri).path.rstrip("/") or "/"}
    if "://" in uri:
        scheme, _, rest = uri.partition("://")
        bucket, _, key = rest.partition("/")
        return {"namespace": f"{scheme}://{bucket}", "name": "/" + key.rstrip("/")}
    return {"namespace": "file", "name": uri.rstrip("/") or "/"}


def table_namespace(team_id: int) -> str:
    """The namespace of a team's tables: two teams may each have ``sales.orders``, and a
    consumer (Marquez) must not merge them into one dataset."""
    return f"{settings.OPENLINEAGE_TABLE_NAMESPACE}.team-{team_id}"


def _owner_of(name: str, team_id: int) -> tuple[int, Any]:
    """The team whose table ``name`` is, as the step's team reads it (its own, or one shared
    with it), and the registered table if there is one."""
    try:
        registered = tables.readable_table(team_id, name)
    except tables.TableNotReadable:
        return team_id, None
    return registered.team_id, registered


def _table_dataset(name: str, team_id: int) -> dict[str, Any]:
    """``name`` as the step's team means it (``batches.tables``): another team's table of the
    same name never lends its schema."""
    database, _, table = name.rpartition(".")
    database = database or "default"
    owner, registered = _owner_of(f"{database}.{table}", team_id)
    dataset: dict[str, Any] = {
        "namespace": table_namespace(owner),
        "name": f"{database}.{table}",
        "facets": {},
    }
    if registered is not None:
        columns = struct_columns(registered.ddl)
        if columns and registered.batch_id_partition_col:
            columns.setdefault(registered.batch_id_partition_col, "bigint")  # the partitions
        if columns:
            dataset["facets"]["schema"] = _facet(
                "schema", fields=[{"name": c, "type": t} for c, t in columns.items()]
            )
    return dataset


def _claimed_folders(run: InstanceExec) -> list[str]:
    """The folders of the files the step claimed in its job's run."""
    batches: set[int] = set()
    for model in (BatchConsumpQueue, ArchiveConsumpQueue):
        batches |= set(
            model.objects.filter(
                process_id=run.process_id, target_batch_id=run.target_batch_id
            ).values_list("source_batch_id", flat=True)
        )
    paths = File.objects.filter(batch_id__in=batches).values_list("path", flat=True)
    return sorted({str(PurePosixPath(p).parent) for p in paths})


def _column_lineage(run: InstanceExec, target: str) -> dict[str, Any] | None:
    relations = LineageRelation.objects.filter(
        query__instance_exec=run,
        target_node__container_node__qualified_name=target,
    ).select_related("src_node__container_node", "target_node")
    fields: dict[str, dict[str, Any]] = {}
    for relation in relations.order_by("target_node__node_order", "id"):
        functions = edge_functions(relation.dot_string)
        if not functions:
            subtype = "IDENTITY"
        elif set(functions) & AGGREGATES:
            subtype = "AGGREGATION"
        else:
            subtype = "TRANSFORMATION"
        transformation = {"type": "DIRECT", "subtype": subtype}
        if functions:
            transformation["description"] = ", ".join(functions)
        source = relation.src_node
        table = source.container_node
        assert table is not None  # a column relation's source is a column of a table
        owner, _ = _owner_of(table.qualified_name, run.process.bus_domain.team_id)
        fields.setdefault(relation.target_node.display_name, {"inputFields": []})[
            "inputFields"
        ].append(
            {
                "namespace": table_namespace(owner),
                "name": table.qualified_name,
                "field": source.display_name,
                "transformations": [transformation],
            }
        )
    return _facet("columnLineage", fields=fields) if fields else None


def _sql_sources(run: InstanceExec) -> list[str]:
    tables = LineageNode.objects.filter(
        container_node__isnull=True,
        outgoing__query__instance_exec=run,
        outgoing__target_node__container_node__isnull=True,
    )
    return sorted(set(tables.values_list("qualified_name", flat=True)))


def _datasets(
    run: InstanceExec, kind: str, *, with_statistics: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    step = run.process
    team = step.bus_domain.team_id
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = [_table_dataset(name, team) for name in run.outputs]
    if kind in ("spark.shred", "spark.load"):
        inputs = [_location_dataset(folder) for folder in _claimed_folders(run)]
    elif kind in ("spark.cleanse", "spark.export"):
        group = "cleanse" if kind == "spark.cleanse" else "export"
        source = step.property_value(group, "source_table")
        inputs = [_table_dataset(source, team)] if source else []
        if kind == "spark.export":
            location = step.property_value("export", "location")
            jdbc = step.property_value("export", "jdbc_url")
            if location:
                outputs.append(_location_dataset(location))
            elif jdbc:
                table = step.property_value("export", "jdbc_table") or ""
                outputs.append({"namespace": jdbc.split("?")[0], "name": table})
    elif kind == "spark.sql":
        inputs = [_table_dataset(name, team) for name in _sql_sources(run)]
        output = step.property_value("sql", "output_table") or f"default.{step.name}"
        if not run.outputs:  # the START event: the output is known before it is written
            outputs = [_table_dataset(output, team)]
        for dataset in outputs:
            lineage = _column_lineage(run, dataset["name"])
            if lineage:
                dataset["facets"]["columnLineage"] = lineage
    elif kind == "ingest.scan":
        state = ScanState.objects.filter(process=step).values_list("location", flat=True).first()
        location = state or step.property_value("scan", "location")
        inputs = [_location_dataset(location)] if location else []
    rows = run.counters.get("rows_out") if isinstance(run.counters, dict) else None
    if with_statistics and isinstance(rows, int) and outputs:
        # the step's own count is of its main output, the first table it wrote
        outputs[0]["outputFacets"] = {"outputStatistics": _facet("outputStatistics", rowCount=rows)}
    return inputs, outputs
