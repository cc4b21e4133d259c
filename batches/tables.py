"""Which registered tables a team's steps may read and write: the one place that decides
(docs/security.md, "Tables belong to a team").

- A table belongs to one team; two teams may each have ``sales.orders``.
- A team's steps read its own tables and those another team shared with it (read-only).
  When a shared table has the name of one of the team's own, the team's own wins: a share
  never changes what a name already meant to the team.
- A team's steps write only its own tables, in the team's folder under ``BDRE_WAREHOUSE``
  (``team-<id>/<db>/<table>``), or under ``BDRE_TABLE_STORE`` when an object store holds
  the tables. A name the team does not own and that is shared with it is
  refused (read-only); any other name becomes a table of the team's own.

Used by the Spark kinds (``processes.step_kinds.spark_io``, ``spark_sql``), lineage
(``known_schema`` callers, OpenLineage datasets) and the API."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet

from batches.locations import OBJECT_STORE_SCHEMES, LocationRefused, normalise, spark_path
from batches.models import HiveTable, TableShare
from bdre.access import AnyUser, Role, require_role

# A database or table name becomes a folder: nothing that could climb out of the team's one.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


class TableNotReadable(LookupError):
    pass


class TableNotWritable(PermissionError):
    pass


def split_name(name: str) -> tuple[str, str]:
    """``db.table`` (or ``table``, in ``default``) as ``(db, table)``."""
    database, _, table = name.strip().rpartition(".")
    return database or "default", table


def team_warehouse(team_id: int) -> Path:
    """The folder of a team's tables: each team writes under its own."""
    return settings.BDRE_WAREHOUSE / f"team-{team_id}"


def team_tables(team_id: int) -> str:
    """Where a team's new tables go: its folder under ``BDRE_WAREHOUSE``, or its prefix under
    ``BDRE_TABLE_STORE`` as Spark names it (``s3a://``: the S3A connector)."""
    store = settings.BDRE_TABLE_STORE
    if not store:
        return str(team_warehouse(team_id))
    try:
        root = normalise(store)
    except LocationRefused as exc:
        raise ImproperlyConfigured(f"BDRE_TABLE_STORE: {exc}") from None
    if root.partition("://")[0] not in OBJECT_STORE_SCHEMES.values() and not root.startswith(
        "hdfs://"
    ):
        raise ImproperlyConfigured(
            f"BDRE_TABLE_STORE={store}: give an object store's prefix (s3://bucket/prefix) or "
            "hdfs://; a local folder is BDRE_WAREHOUSE's"
        )
    return f"{spark_path(root.rstrip('/'))}/team-{team_id}"


def own_tables(team_id: int) -> QuerySet[HiveTable]:
    return HiveTable.objects.filter(team_id=team_id)


def _shared_with(team_id: int) -> QuerySet[HiveTable]:
    return HiveTable.objects.filter(shares__team_id=team_id).exclude(team_id=team_id)


def _key(table: HiveTable) -> str:
    # Spark reads names without regard to case: Lake.Orders and lake.orders are one name.
    return f"{table.dbname}.{table.table_name}".lower()


def readable_tables(team_id: int) -> list[HiveTable]:
    """The tables a step of ``team_id`` may read, one per ``db.table`` name: its own, then
    those shared with it whose name it does not own."""
    readable = {_key(t): t for t in own_tables(team_id).order_by("id")}
    for table in _shared_with(team_id).order_by("id"):
        readable.setdefault(_key(table), table)
    return list(readable.values())


def readable_queryset(team_id: int) -> QuerySet[HiveTable]:
    """:func:`readable_tables` as a queryset (for ``known_schema`` and the API)."""
    return HiveTable.objects.filter(pk__in=[t.pk for t in readable_tables(team_id)])


def readable_table(team_id: int, name: str) -> HiveTable:
    """The table ``name`` means to a step of ``team_id``, or an error naming what it may read."""
    readable = {_key(t): t for t in readable_tables(team_id)}
    found = readable.get("{}.{}".format(*split_name(name)).lower())
    if found is None:
        names = sorted(f"{t.dbname}.{t.table_name}" for t in readable.values())
        raise TableNotReadable(
            f"{name} is not a table your team may read: a step reads its team's tables and "
            f"those shared with it ({', '.join(names) or 'none yet'})"
        )
    return found


def check_name(database: str, table: str) -> None:
    """Refuse a name that is no plain identifier: it becomes a folder under the team's."""
    for part in (database, table):
        if not NAME.fullmatch(part):
            raise TableNotWritable(
                f"{database}.{table}: a database or table name is letters, digits, '_' and '-' only"
            )


@dataclass(frozen=True)
class Destination:
    """Where a step of a team writes ``db.table``: its registration if the team has one."""

    team_id: int
    dbname: str
    table_name: str
    location: str
    existing: HiveTable | None


def writable_table(team_id: int, database: str, table: str) -> Destination:
    """Where a step of ``team_id`` writes ``database.table``: the team's own registration
    (its recorded location, so that nothing registered before moves), or a new table in the
    team's folder. Refused: a name shared with the team (read-only), a name that is not a
    plain identifier, and a location inside or around another team's table."""
    check_name(database, table)
    own = (
        own_tables(team_id)
        .filter(dbname__iexact=database, table_name__iexact=table)
        .order_by("id")
        .first()
    )
    if own is not None:
        return Destination(team_id, own.dbname, own.table_name, own.location, own)
    if _shared_with(team_id).filter(dbname__iexact=database, table_name__iexact=table).exists():
        raise TableNotWritable(
            f"{database}.{table} is another team's table shared with your team read-only: "
            "write to a name of your own"
        )
    database, table = database.lower(), table.lower()
    location = f"{team_tables(team_id)}/{database}/{table}"
    _refuse_other_teams_folder(team_id, location)
    return Destination(team_id, database, table, location, None)


def _refuse_other_teams_folder(team_id: int, location: str) -> None:
    # Registrations older than the team folders sit at BDRE_WAREHOUSE/<db>/<table>; a new
    # location never lands inside one of another team's, nor around one.
    others = HiveTable.objects.exclude(team_id=team_id).filter(
        Q(location=location)
        | Q(location__startswith=location + "/")
        | Q(location__in=_ancestors(location))
    )
    if others.exists():
        raise TableNotWritable(
            f"{location} is inside or around another team's table: write to another name"
        )


def _ancestors(location: str) -> list[str]:
    scheme, sep, rest = location.partition("://")
    if not sep:
        return [str(p) for p in Path(location).parents]
    # scheme://bucket/a/b: scheme://bucket/a and scheme://bucket (Path would drop a "/").
    parts = rest.split("/")
    return [f"{scheme}://{'/'.join(parts[:n])}" for n in range(len(parts) - 1, 0, -1)]


def register_written(
    destination: Destination, *, bus_domain_id: int, defaults: dict[str, Any]
) -> HiveTable:
    """Register (or update) the team's table once its partition is written."""
    registered, _ = HiveTable.objects.update_or_create(
        team_id=destination.team_id,
        dbname=destination.dbname,
        table_name=destination.table_name,
        defaults={**defaults, "location": destination.location, "bus_domain_id": bus_domain_id},
    )
    return registered


def _require_admin(user: AnyUser, table: HiveTable) -> None:
    require_role(user, table.team, Role.ADMIN)


@transaction.atomic
def share(user: AnyUser, table: HiveTable, team: Group) -> TableShare:
    """Let the steps of ``team`` read ``table`` (an admin of the table's team decides)."""
    _require_admin(user, table)
    if team.pk == table.team_id:
        raise ValidationError({"team": [f"{table} is this team's own table: it reads it already."]})
    # Authenticated users are Users (BDRE keeps Django's user model); the anonymous user is not.
    created_by = user if isinstance(user, User) else None
    found, _ = TableShare.objects.get_or_create(
        table=table, team=team, defaults={"created_by": created_by}
    )
    return found


@transaction.atomic
def unshare(user: AnyUser, table_share: TableShare) -> None:
    """Stop the steps of the share's team reading the table (its steps already running keep
    the session they started with; the next run no longer sees it)."""
    _require_admin(user, table_share.table)
    table_share.delete()
