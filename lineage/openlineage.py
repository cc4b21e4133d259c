"""OpenLineage run events: every job run and step run says START, then COMPLETE, FAIL or
ABORT, with the datasets it read and wrote and the column lineage of its outputs, so that
Marquez or any OpenLineage consumer can follow BDRE's pipelines.

Events are built from the ``openlineage-python`` client's classes and emitted by its
``OpenLineageClient``, through the transports the settings name (``OPENLINEAGE_TRANSPORT``:
``http`` to ``OPENLINEAGE_URL``, ``file`` to ``OPENLINEAGE_FILE``, ``console`` to the log)
or, when BDRE's settings name none, through the client's own configuration
(``OPENLINEAGE_CONFIG``, ``OPENLINEAGE__TRANSPORT__*``). They are built and sent after the
lifecycle's transaction commits (:mod:`lineage.announce` says when, and imports this module
then), so they describe committed state and a rolled-back call sends nothing; a consumer that
is down is logged, never a reason for a run to fail.

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
import os
import urllib.parse
import uuid
from typing import Any, TypeVar

from django.conf import settings
from openlineage.client import OpenLineageClient
from openlineage.client.constants import __version__ as CLIENT_VERSION
from openlineage.client.event_v2 import (
    Dataset,
    InputDataset,
    Job,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
)
from openlineage.client.facet_v2 import (
    BaseFacet,
    JobFacet,
    RunFacet,
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde
from openlineage.client.transport import Transport, get_default_factory
from openlineage.client.transport.file import FileTransport

from batches import tables
from batches.models import ArchiveConsumpQueue, BatchConsumpQueue, File
from lineage.announce import transports
from lineage.extract import edge_functions, struct_columns
from lineage.models import LineageRelation
from lineage.steps import folder_of, jdbc_base
from processes import step_kinds
from processes.models import InstanceExec, Process, grouped_properties

log = logging.getLogger(__name__)

PRODUCER = "https://github.com/bdre/bdre"
# The schemas of the facets BDRE writes, as the client declares them.
_FACETS: dict[str, type[BaseFacet]] = {
    "parent": parent_run.ParentRunFacet,
    "errorMessage": error_message_run.ErrorMessageRunFacet,
    "processing_engine": processing_engine_run.ProcessingEngineRunFacet,
    "jobType": job_type_job.JobTypeJobFacet,
    "sql": sql_job.SQLJobFacet,
    "schema": schema_dataset.SchemaDatasetFacet,
    "columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet,
    "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet,
}
FACET_SCHEMAS = {name: facet._get_schema() for name, facet in _FACETS.items()}
AGGREGATES = {"SUM", "COUNT", "AVG", "MIN", "MAX", "COLLECT_LIST", "COLLECT_SET", "FIRST", "LAST"}


# --- where events go --------------------------------------------------------------------------


def transport_config(kind: str) -> dict[str, Any]:
    """The client's configuration of one of BDRE's transports."""
    if kind == "http":
        retries = settings.OPENLINEAGE_RETRIES
        config: dict[str, Any] = {
            "type": "http",
            # BDRE's URL is the whole endpoint (``.../api/v1/lineage``), not a base URL
            "url": settings.OPENLINEAGE_URL,
            "endpoint": "",
            "timeout": settings.OPENLINEAGE_TIMEOUT,
            "retry": {"total": retries, "connect": retries, "read": retries},
        }
        if settings.OPENLINEAGE_API_KEY:
            config["auth"] = {"type": "api_key", "apiKey": settings.OPENLINEAGE_API_KEY}
        return config
    if kind == "file":
        return {
            "type": f"{__name__}.{LockedFileTransport.__name__}",
            "log_file_path": settings.OPENLINEAGE_FILE,
            "append": True,
        }
    if kind == "console":
        return {"type": "console"}
    raise ValueError(f"unknown OpenLineage transport {kind!r}")


class LockedFileTransport(FileTransport):
    """The client's file transport in append mode, writing each event as one line under an
    exclusive lock: workers in several processes append to one file, and an event with its
    column lineage can be long enough that an unlocked append (on NFS, say) interleaves."""

    def emit(self, event: Any) -> None:
        if not self.config.append:
            super().emit(event)
            return
        line = Serde.to_json(event) + "\n"
        with open(self.config.log_file_path, "a", encoding="utf-8") as out:
            fcntl.flock(out, fcntl.LOCK_EX)
            out.write(line)


class _Client(OpenLineageClient):
    def _alias_env_vars(self) -> None:
        """The client would copy ``OPENLINEAGE_URL`` into ``OPENLINEAGE__TRANSPORT__*``
        variables of the process (and its Spark children): BDRE's ``OPENLINEAGE_URL`` is a
        whole endpoint, handed to the client as a transport of its own."""


@functools.lru_cache(maxsize=4)
def _client(key: str) -> OpenLineageClient:
    """One client (and HTTP session) per configuration, kept for the process's events."""
    configs = json.loads(key)
    if isinstance(configs, dict):  # the client configures itself from its file and variables
        return _Client()
    factory = get_default_factory()
    if len(configs) == 1:
        transport: Transport = factory.create(configs[0])
    else:  # every transport gets every event, whichever fails
        composite = {"type": "composite", "transports": configs, "continue_on_failure": True}
        transport = factory.create(composite)
    return _Client(transport=transport)


def client() -> OpenLineageClient:
    configs = [transport_config(kind) for kind in transports()]
    if configs:
        return _client(json.dumps(configs, sort_keys=True))
    # the client's own configuration: a new client when its variables change
    variables = sorted((k, v) for k, v in os.environ.items() if k.startswith("OPENLINEAGE"))
    return _client(json.dumps({"environment": variables}))


# --- sending ----------------------------------------------------------------------------------


def send(run_id: int, event_type: str, error: str = "") -> RunEvent | None:
    """Build and emit one event. Never raises: lineage must not fail a run."""
    try:
        event = build_event(run_id, event_type, error)
    except Exception:
        log.exception("OpenLineage: cannot build the %s event of run %s", event_type, run_id)
        return None
    try:
        client().emit(event)
    except Exception as exc:  # refused, timed out, a 4xx/5xx, an unwritable file
        log.warning(
            "OpenLineage: the %s event of run %s was not delivered: %s", event_type, run_id, exc
        )
    return event


# --- the event --------------------------------------------------------------------------------


def run_uuid(run_id: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"bdre://{settings.OPENLINEAGE_NAMESPACE}/{run_id}"))


def job_name(process: Process) -> str:
    parent = process.parent if process.parent_id else None
    return f"{parent.name}.{process.name}" if parent is not None else process.name


def job_namespace(process: Process) -> str:
    """The namespace of the team's jobs: process names are unique per team only."""
    return f"{settings.OPENLINEAGE_NAMESPACE}.team-{process.bus_domain.team_id}"


def run_event(run_id: int, event_type: str, error: str = "") -> dict[str, Any]:
    """The event as the JSON object the transports send."""
    return Serde.to_dict(build_event(run_id, event_type, error))


def build_event(run_id: int, event_type: str, error: str = "") -> RunEvent:
    run = InstanceExec.objects.select_related(
        "process__parent", "process__process_type", "process__bus_domain"
    ).get(pk=run_id)
    process = run.process
    namespace = job_namespace(process)
    when = run.start_ts if event_type == "START" or run.end_ts is None else run.end_ts
    run_facets: dict[str, RunFacet] = {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=_version(),
            name="BDRE",
            openlineageAdapterVersion=CLIENT_VERSION,
            producer=PRODUCER,
        )
    }
    if run.parent_id:
        job = process.parent
        assert job is not None  # a run with a parent run is a step's, and a step has its job
        parent_uuid = run_uuid(run.parent_id)
        run_facets["parent"] = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=parent_uuid, facets=None),
            job=parent_run.Job(namespace=namespace, name=job.name, facets=None),
            root=parent_run.Root(
                run=parent_run.RootRun(runId=parent_uuid, facets=None),
                job=parent_run.RootJob(namespace=namespace, name=job.name, facets=None),
            ),
            producer=PRODUCER,
        )
    if event_type in ("FAIL", "ABORT"):
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error or run.error or "failed", programmingLanguage="python", producer=PRODUCER
        )
    kind = process.process_type.job_kind
    job_facets: dict[str, JobFacet] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH",
            integration="BDRE",
            jobType="TASK" if run.parent_id else "JOB",
            producer=PRODUCER,
        )
    }
    inputs: list[InputDataset] = []
    outputs: list[OutputDataset] = []
    if run.parent_id:
        spec = step_kinds.find(kind)
        statement = spec.statement if spec is not None else None
        query = process.property_value(statement.group, statement.key) if statement else None
        if query:
            job_facets["sql"] = sql_job.SQLJobFacet(query=query, dialect="spark", producer=PRODUCER)
        inputs, outputs = _datasets(run, spec, event_type)
    return RunEvent(
        eventType=RunState(event_type),
        eventTime=when.isoformat(),
        producer=PRODUCER,
        run=Run(runId=run_uuid(run.pk), facets=run_facets),
        job=Job(namespace=namespace, name=job_name(process), facets=job_facets),
        inputs=inputs,
        outputs=outputs,
    )


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bdre")
    except PackageNotFoundError:
        return "0"


# --- datasets ---------------------------------------------------------------------------------

D = TypeVar("D", bound=Dataset)


def _is_location(name: str) -> bool:
    return "://" in name or name.startswith(("/", "file:", "jdbc:"))


def _jdbc(url: str, table: str) -> tuple[str, str]:
    """A database table outside the warehouse, as the lineage of an export names it."""
    return jdbc_base(url), table


def _location(uri: str) -> tuple[str, str]:
    """A file or folder by the OpenLineage naming rules: ``s3://bucket`` + key, or
    ``file`` + absolute path; a database table as ``jdbc:...#table`` names it."""
    if uri.startswith("jdbc:"):
        url, _, table = uri.partition("#")
        return _jdbc(url, table)
    if uri.startswith("file:"):  # file:///x, file:/x (as Spark writes it), file://host/x
        return "file", urllib.parse.urlparse(uri).path.rstrip("/") or "/"
    if "://" in uri:
        scheme, _, rest = uri.partition("://")
        bucket, _, key = rest.partition("/")
        return f"{scheme}://{bucket}", "/" + key.rstrip("/")
    return "file", uri.rstrip("/") or "/"


def _location_dataset(uri: str, cls: type[D]) -> D:
    namespace, name = _location(uri)
    return cls(namespace, name)


def table_namespace(team_id: int) -> str:
    """The namespace of a team's tables: two teams may each have ``sales.orders``, and a
    consumer (Marquez) must not merge them into one dataset."""
    return f"{settings.OPENLINEAGE_TABLE_NAMESPACE}.team-{team_id}"


def _qualified(name: str) -> str:
    database, _, table = name.rpartition(".")
    return f"{database or 'default'}.{table}"


def _owner_of(name: str, team_id: int) -> tuple[int, Any]:
    """The team whose table ``name`` is, as the step's team reads it (its own, or one shared
    with it), and the registered table if there is one."""
    try:
        registered = tables.readable_table(team_id, name)
    except tables.TableNotReadable:
        return team_id, None
    return registered.team_id, registered


def _dataset_id(name: str, team_id: int) -> tuple[str, str]:
    """The namespace and name of a table or location as the step's team means it."""
    if _is_location(name):
        return _location(name)
    owner, _ = _owner_of(_qualified(name), team_id)
    return table_namespace(owner), _qualified(name)


def _key(namespace: str, name: str) -> tuple[str, str]:
    return namespace, name.lower()


def _table_dataset(name: str, team_id: int, cls: type[D]) -> D:
    """``name`` as the step's team means it (``batches.tables``): another team's table of the
    same name never lends its schema."""
    name = _qualified(name)
    owner, registered = _owner_of(name, team_id)
    dataset = cls(table_namespace(owner), name)
    if registered is not None:
        columns = struct_columns(registered.ddl)
        if columns and registered.batch_id_partition_col:
            columns.setdefault(registered.batch_id_partition_col, "bigint")  # the partitions
        if columns:
            fields = [
                schema_dataset.SchemaDatasetFacetFields(name=c, type=t, fields=None)
                for c, t in columns.items()
            ]
            dataset.facets = {
                "schema": schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)
            }
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
    return sorted({folder_of(p) for p in paths})


def _column_lineage(
    run: InstanceExec, team_id: int
) -> dict[str, column_lineage_dataset.ColumnLineageDatasetFacet]:
    """The column lineage the run recorded (``LineageRelation`` rows between columns, whatever
    the step's kind), by the table or location (its lineage node's name) the columns are of."""
    relations = (
        LineageRelation.objects.filter(
            query__instance_exec=run,
            target_node__container_node__isnull=False,
            src_node__container_node__isnull=False,
        )
        .select_related("src_node__container_node", "target_node__container_node")
        .order_by("target_node__node_order", "id")
    )
    ids = functools.cache(lambda name: _dataset_id(name, team_id))  # one look-up per table
    written: dict[str, dict[str, list[column_lineage_dataset.InputField]]] = {}
    for relation in relations:
        functions = edge_functions(relation.dot_string)
        if relation.indirect:
            # OpenLineage's subtypes of an indirect dependency: FILTER, JOIN, GROUP_BY
            transformations = [
                column_lineage_dataset.Transformation(
                    type="INDIRECT", subtype=kind.upper().replace(" ", "_"), description=kind
                )
                for kind in relation.indirect.split(",")
            ]
        else:
            if not functions:
                subtype = "IDENTITY"
            elif set(functions) & AGGREGATES:
                subtype = "AGGREGATION"
            else:
                subtype = "TRANSFORMATION"
            transformations = [
                column_lineage_dataset.Transformation(
                    type="DIRECT", subtype=subtype, description=", ".join(functions) or None
                )
            ]
        source, target = relation.src_node, relation.target_node
        assert source.container_node is not None and target.container_node is not None
        namespace, name = ids(source.container_node.qualified_name)
        columns = written.setdefault(target.container_node.qualified_name, {})
        columns.setdefault(target.display_name, []).append(
            column_lineage_dataset.InputField(
                namespace=namespace,
                name=name,
                field=source.display_name,
                transformations=transformations,
            )
        )
    return {
        dataset: column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={
                column: column_lineage_dataset.Fields(inputFields=fields)
                for column, fields in columns.items()
            },
            dataset=None,
            producer=PRODUCER,
        )
        for dataset, columns in written.items()
    }


def _dataset(name: str, team_id: int, cls: type[D]) -> D:
    if _is_location(name):
        return _location_dataset(name, cls)
    return _table_dataset(name, team_id, cls)


def _datasets(
    run: InstanceExec, spec: step_kinds.StepKind | None, event_type: str
) -> tuple[list[InputDataset], list[OutputDataset]]:
    """What the step run read and wrote, as it recorded them (``InstanceExec.inputs`` and
    ``outputs``), and where its kind writes outside the warehouse (the spec's
    ``destinations``). At the START, before it read or wrote, what its kind's spec says its
    properties name (``reads``, ``writes``), and the folders of the files it claimed."""
    step = run.process
    team = step.bus_domain.team_id
    properties = grouped_properties(step.properties.all())
    read, written = list(run.inputs), list(run.outputs)
    if event_type == "START":
        read = spec.named(spec.reads, properties, step.name) if spec is not None else []
        read += [folder for folder in _claimed_folders(run) if folder not in read]
        written = spec.named(spec.writes, properties, step.name) if spec is not None else []
    if spec is not None:
        written += [
            name for name in spec.written_outside(properties, step.name) if name not in written
        ]
    inputs = [_dataset(name, team, InputDataset) for name in read]
    outputs = [_dataset(name, team, OutputDataset) for name in written]
    # an output and the lineage of its columns meet by namespace and name (lineage keeps
    # tables in lower case)
    lineage = {
        _key(*_dataset_id(node, team)): (node, facet)
        for node, facet in _column_lineage(run, team).items()
    }
    for dataset in outputs:
        found = lineage.pop(_key(dataset.namespace, dataset.name), None)
        if found is not None:
            dataset.facets = {**(dataset.facets or {}), "columnLineage": found[1]}
    for node, facet in lineage.values():  # written, by its lineage, though not listed
        extra = _dataset(node, team, OutputDataset)
        extra.facets = {**(extra.facets or {}), "columnLineage": facet}
        outputs.append(extra)
    rows = run.counters.get("rows_out") if isinstance(run.counters, dict) else None
    if event_type == "COMPLETE" and isinstance(rows, int) and outputs:
        # the step's own count is of its main output, the first table it wrote
        outputs[0].outputFacets = {
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=rows, producer=PRODUCER
            )
        }
    return inputs, outputs
