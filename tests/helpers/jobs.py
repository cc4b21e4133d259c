"""The one way the tests build a job: registered through the registry
(``processes.registry.create_job``), as a developer registers one, with the steps the
helpers below describe. ``JobFactory`` (tests/helpers/factories.py) writes a bare row instead,
for a test of what the registry would refuse or never writes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from processes.models import BusDomain, Process
from processes.registry import Properties, StepSpec, create_job

# The seeded process types (processes/migrations/0002_seed_master_data.py).
JOB_TYPE = 5  # generic-job
CALL = 51  # python.callable
SCAN = 52  # ingest.scan
LOAD = 53  # spark.load
CLEANSE = 54  # spark.cleanse
SHRED = 55  # spark.shred
SQL = 56  # spark.sql
EXPORT = 57  # spark.export
STEP_TYPE = CALL  # the kind of the steps of a job built from a count of steps


class HasApplication(Protocol):
    application: BusDomain


def build_job(
    owner: BusDomain | HasApplication,
    name: str,
    steps: int | Sequence[StepSpec] = 1,
    *,
    upstream: Iterable[Process] = (),
    cut: str = "",
    can_recover: bool = True,
    links: Mapping[str, Sequence[str]] | None = None,
    max_retries: int = 3,
    lease_seconds: int = 3600,
    properties: Properties | None = None,
    description: str = "",
    process_type_id: int = JOB_TYPE,
) -> Process:
    """``build_job(team, "p2", steps=2, upstream=[p1])``: the job ``name``, registered in
    ``owner`` (an application, or the ``team`` fixture: its application).

    ``steps`` is a count of placeholder ``python.callable`` steps, named ``<name>_s1``,
    ``<name>_s2``..., each consuming the batches of ``upstream`` with the cut pattern ``cut``
    and ``can_recover``; or the steps themselves (:func:`scan_step`, :func:`load_step`,
    :func:`sql_step`, :func:`callable_step`, ``StepSpec``), each with its own upstream jobs,
    cut pattern and recovery. Steps follow one another in order, unless ``links`` (a step's
    name -> the names of the steps after it) says otherwise: a step it leaves out ends its
    branch."""
    upstream_ids = job_ids(upstream)
    if isinstance(steps, int):
        specs = [
            StepSpec(
                f"{name}_s{i + 1}",
                STEP_TYPE,
                upstream=list(upstream_ids),
                batch_cut_pattern=cut,
                can_recover=can_recover,
            )
            for i in range(steps)
        ]
    else:
        if upstream_ids or cut or not can_recover:
            raise TypeError("upstream, cut and can_recover apply to a count of steps only")
        specs = list(steps)
    if links is not None:
        unknown = set(links) - {spec.name for spec in specs}
        if unknown:
            raise ValueError(f"links name no step of {name}: {sorted(unknown)}")
        specs = [dataclasses.replace(s, next=list(links.get(s.name, []))) for s in specs]
    return create_job(
        bus_domain=owner if isinstance(owner, BusDomain) else owner.application,
        name=name,
        process_type_id=process_type_id,
        steps=specs,
        description=description,
        properties=properties,
        max_retries=max_retries,
        lease_seconds=lease_seconds,
    )


def job_ids(jobs: Iterable[Process]) -> list[int]:
    return [job.pk for job in jobs]


def callable_step(
    name: str, path: str = "", *, upstream: Iterable[Process] = (), **test: str
) -> StepSpec:
    """A ``python.callable`` step calling ``path`` (none: a placeholder that calls nothing),
    with ``test`` as its ``test.*`` properties (what tests/processes/callables.py reads)."""
    properties: dict[str, dict[str, str]] = {"callable": {"path": path}} if path else {}
    if test:
        properties["test"] = test
    return StepSpec(name, CALL, upstream=job_ids(upstream), properties=properties)


def sql_step(
    name: str,
    query: str,
    *,
    output: str | None = None,
    upstream: Iterable[Process] = (),
    spark: Mapping[str, str] | None = None,
    expect: Mapping[str, str] | None = None,
) -> StepSpec:
    """A ``spark.sql`` step running ``query`` into the table ``output``, with ``spark`` as
    its own Spark options and ``expect`` as its expectations (``<table>.<rule>`` -> rule)."""
    sql = {"query": query} | ({"output_table": output} if output is not None else {})
    properties = {"sql": sql} | ({"spark": dict(spark)} if spark else {})
    properties |= {"expect": dict(expect)} if expect else {}
    return StepSpec(name, SQL, upstream=job_ids(upstream), properties=properties)


def load_step(
    name: str, table: str, *, format: str, upstream: Iterable[Process] = (), **options: str
) -> StepSpec:
    """A ``spark.load`` step loading the files of its batches, in ``format``, into ``table``,
    with ``options`` as its other ``load.*`` properties (a ``schema``, say)."""
    load = {"format": format, "table": table, **options}
    return StepSpec(name, LOAD, upstream=job_ids(upstream), properties={"load": load})


def cleanse_step(
    name: str,
    source: str,
    rules: list[dict],
    *,
    upstream: Iterable[Process] = (),
    expect: Mapping[str, str] | None = None,
    **tables: str,
) -> StepSpec:
    """A ``spark.cleanse`` step checking ``source``'s rows against ``rules`` (its fields),
    with ``tables`` as its ``clean_table`` and ``invalid_table``, and ``expect`` as its
    expectations."""
    cleanse = {"source_table": source, "rules": json.dumps(rules), **tables}
    properties = {"cleanse": cleanse} | ({"expect": dict(expect)} if expect else {})
    return StepSpec(name, CLEANSE, upstream=job_ids(upstream), properties=properties)


def scan_step(name: str, location: str | Path, **options: str) -> StepSpec:
    """An ``ingest.scan`` step registering the files of ``location`` (a folder, or a URI) as
    soon as they land, with ``options`` as its other ``scan.*`` properties."""
    where = location.as_uri() if isinstance(location, Path) else location
    return StepSpec(
        name, SCAN, properties={"scan": {"location": where, "min_age_seconds": "0", **options}}
    )


def fragile_pipeline(
    owner: BusDomain | HasApplication, flag: Path, *, max_retries: int
) -> tuple[Process, Process]:
    """A producer and a consumer whose one step fails until ``flag`` exists (the fix a
    retry waits for): ``(producer, consumer)``."""
    producer = build_job(owner, "producer", [callable_step("produce")])
    fragile = callable_step(
        "fragile", "tests.processes.callables.fail_until_flag", upstream=[producer], flag=str(flag)
    )
    return producer, build_job(owner, "consumer", [fragile], max_retries=max_retries)


def sql_document(application: str, query: str, output: str) -> dict:
    """The pipeline document (``POST /api/v1/processes/pipeline/``, ``validate/``, an import)
    of the job ``report`` with one ``spark.sql`` step, ``report_sql``."""
    return {
        "name": "report",
        "application": application,
        "process_type": "generic-job",
        "steps": [
            {
                "name": "report_sql",
                "process_type": "generic-sql",
                "properties": {"sql": {"query": query, "output_table": output}},
            }
        ],
    }


def sql_form(application_id: int, properties: str, **buttons: str) -> dict:
    """The register page's form (``/jobs/new/``) for the job ``report`` with one ``spark.sql``
    step, ``report_sql``, of the properties lines given; ``buttons`` the one clicked."""
    return {
        "application": application_id,
        "name": "report",
        "job_type": JOB_TYPE,
        "max_retries": 3,
        "lease_seconds": 3600,
        "timezone": "UTC",
        "step-TOTAL_FORMS": 1,
        "step-INITIAL_FORMS": 0,
        "step-0-name": "report_sql",
        "step-0-kind": SQL,
        "step-0-properties": properties,
        **buttons,
    }
