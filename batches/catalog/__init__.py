"""The published catalog: BDRE's tables in a Hive metastore, for a user's own SparkSession
(a notebook, ``spark-submit``, a BI tool) to list and query (docs/operations.md, "The
catalog").

``HiveTable`` rows stay the source of truth; the metastore is a copy that :func:`sync`
brings in line with them, idempotently, from a short-lived Spark session of its own
(:func:`catalog_session`, started by ``manage.py sync_catalog``) that runs BDRE's own DDL and
never a user's SQL. The steps' session keeps its in-memory catalog: a persistent catalog
there would let one team's Spark SQL name another team's tables, and a JVM has only one
catalog implementation.

Names: team ``<id>``'s ``db.table`` is ``t<id>_<db>.<table>`` in the catalog, unique per
team and stable when the team is renamed. The team boundary in the published catalog is the
metastore's and the files' permissions, not BDRE's.

Three modules, by what they touch: :mod:`~batches.catalog.metastore` (names, the metastore's
configuration and schema, the catalog's Spark session), :mod:`~batches.catalog.sync` (the
sync itself, in that session) and :mod:`~batches.catalog.trigger` (when a sync runs: the
change check, its record, the subprocess and the periodic task). This package is their API.
"""

from __future__ import annotations

from batches.catalog.metastore import (
    catalog_conf,
    catalog_database,
    catalog_name,
    catalog_session,
    ensure_postgres_schema,
    failure_hint,
    metastore_conf,
    notebook_snippet,
    postgres_metastore,
    qualified,
    quote,
    sql_string,
)
from batches.catalog.sync import SyncSummary, sync_all
from batches.catalog.trigger import (
    SYNC_SCHEDULE_NAME,
    SYNC_TASK,
    Mark,
    Outcome,
    ensure_sync_schedule,
    mark,
    record_failure,
    record_sync,
    state,
    sync_command,
    sync_if_changed,
    why_sync,
)

__all__ = [
    "SYNC_SCHEDULE_NAME",
    "SYNC_TASK",
    "Mark",
    "Outcome",
    "SyncSummary",
    "catalog_conf",
    "catalog_database",
    "catalog_name",
    "catalog_session",
    "ensure_postgres_schema",
    "ensure_sync_schedule",
    "failure_hint",
    "mark",
    "metastore_conf",
    "notebook_snippet",
    "postgres_metastore",
    "qualified",
    "quote",
    "record_failure",
    "record_sync",
    "sql_string",
    "state",
    "sync_all",
    "sync_command",
    "sync_if_changed",
    "why_sync",
]
