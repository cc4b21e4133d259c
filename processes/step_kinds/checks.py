"""The checks a step kind makes of its own properties, for the registry to run when they are
registered (docs/security.md). The steps make the same checks again when they run."""

from __future__ import annotations

import re
from collections.abc import Mapping

from django.conf import settings

from batches.locations import LocationRefused, TeamStorage, check_step_locations
from batches.tables import TableNotWritable, check_name, split_name
from processes.models import Property, grouped_properties
from processes.step_kinds import StepContext
from processes.step_kinds.python_callable import RefusedCallable, resolve
from processes.step_kinds.spark_conf import RefusedSparkOption, check_spark_queue, step_options
from processes.step_kinds.sql_guard import RefusedStatement, check_query


class RefusedManifestName(ValueError):
    pass


class RefusedExport(ValueError):
    pass


MANIFEST_NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")


def check_manifest_name(name: str) -> None:
    """A deduplication manifest's name is a plain word: it becomes a folder of the team's
    (``../`` would reach another team's manifest) and a key in the database."""
    if not MANIFEST_NAME.fullmatch(name):
        raise RefusedManifestName(
            f"dedup.manifest_name must be 1 to 48 letters, digits, _ or -, got {name!r}"
        )


REFUSED = (
    RefusedStatement,
    RefusedCallable,
    TableNotWritable,
    RefusedManifestName,
    LocationRefused,
    RefusedExport,
    RefusedSparkOption,
)

# The tables a kind writes (group, key), and whether the value is a whole ``db.table`` or a
# bare name: each becomes a folder of the team's (batches.tables).
WRITTEN_TABLES = {
    "spark.load": (("load", "table", True),),
    "spark.cleanse": (("cleanse", "clean_table", True), ("cleanse", "invalid_table", True)),
    "spark.sql": (("sql", "output_table", True),),
    "spark.shred": (("shred", "database", False), ("shred", "atomic_table", False)),
}


def check_step_properties(
    kind: str, properties: Mapping[str, Mapping[str, object]], *, team_id: int
) -> None:
    """Raise one of :data:`REFUSED` for a property that a step of ``kind`` of team
    ``team_id`` would refuse to run: a ``sql.query`` of ``spark.sql`` outside the sandbox, a
    ``callable.path`` of ``python.callable`` outside ``BDRE_CALLABLES`` or naming no
    function, a table a Spark kind writes whose name is no plain identifier
    (``../../etc.x``), a location outside the team's storage roots (batches.locations), a
    Spark option a step may not set (spark_conf.step_options)."""
    check_step_locations(kind, properties, TeamStorage(team_id))
    check_export(kind, properties)
    step_options(kind, properties)
    check_spark_queue(kind, properties)
    if kind == "spark.sql":
        query = properties.get("sql", {}).get("query")
        if query:
            check_query(str(query))
    elif kind == "python.callable":
        path = properties.get("callable", {}).get("path")
        if path:
            resolve(str(path))
    elif kind == "spark.shred":
        name = properties.get("dedup", {}).get("manifest_name")
        if name is not None:
            check_manifest_name(str(name))
    for group, key, qualified in WRITTEN_TABLES.get(kind, ()):
        value = properties.get(group, {}).get(key)
        if value:
            check_name(*split_name(str(value)) if qualified else (str(value), "t"))


# A database table an export writes: a name, or schema.name (catalog.schema.name), unquoted:
# it goes into the statement that replaces an earlier attempt's rows (spark_export).
JDBC_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}")
EXPORT_MODES = ("append", "overwrite")


def check_export(kind: str, properties: Mapping[str, Mapping[str, object]]) -> None:
    """An export's ``jdbc_driver`` must be one of ``BDRE_JDBC_DRIVERS``: Spark loads the class
    by its name, which runs its static code. Its ``jdbc_table`` is a plain name, and its
    ``mode`` one Spark and BDRE's rerun rule know."""
    if kind != "spark.export":
        return
    export = properties.get("export", {})
    driver = str(export.get("jdbc_driver") or "")
    if driver and driver not in settings.BDRE_JDBC_DRIVERS:
        raise RefusedExport(
            f"export.jdbc_driver {driver!r} is not one of BDRE_JDBC_DRIVERS: "
            f"{', '.join(settings.BDRE_JDBC_DRIVERS)}"
        )
    table = export.get("jdbc_table")
    if table is not None and not JDBC_TABLE.fullmatch(str(table)):
        raise RefusedExport(
            f"export.jdbc_table must be a plain table name (name or schema.name: letters, "
            f"digits, _ and $), got {table!r}"
        )
    mode = export.get("mode")
    if mode is not None and str(mode) not in EXPORT_MODES:
        raise RefusedExport(f"export.mode must be append or overwrite, got {mode!r}")


def check_step_run(context: StepContext) -> None:
    """Before a step runs: its Spark options and its locations once more, as they are now
    (a row changed behind the registry's back, a grant taken back since), and every file it
    was given to read; each must lie inside the team's storage roots. (The kinds check their
    statements, callables and table names themselves when they run.)"""
    step = context.step
    storage = TeamStorage(step.bus_domain.team_id)
    kind = step.process_type.job_kind
    properties = grouped_properties(Property.objects.filter(process=step))
    try:
        step_options(kind, properties)
        check_spark_queue(kind, properties)
    except RefusedSparkOption as exc:
        context.log("spark.refused", str(exc), "security")
        raise
    try:
        check_step_locations(kind, properties, storage)
        check_export(kind, properties)
        for file in context.files:
            server = storage.servers.get(file.server_id) if file.server_id else None
            if file.server_id and server is None:
                raise LocationRefused(f"{file.path}: its server is not a server of the team")
            storage.check(file.path, server=server)
    except (LocationRefused, RefusedExport) as exc:
        context.log("location.refused", str(exc), "security")
        raise
