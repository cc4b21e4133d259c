"""Which storage locations a team may name: the one place that decides (docs/security.md,
"Storage is granted, not typed").

A team may read and write inside its roots, and nowhere else:

- its own folders, ``<BDRE_LANDING>/team-<id>/`` and ``<BDRE_WAREHOUSE>/team-<id>/`` (and
  ``<BDRE_TABLE_STORE>/team-<id>/`` when the tables are on an object store). Inside those
  three, a team reaches its own folder only: no root, not even a server's over ``/data`` or
  over the same bucket, reaches another team's folder or BDRE's own (step logs, metastore);
- the ``root`` of every :class:`~processes.models.Server` it owns or that is granted to it
  (``granted_teams``). Only installation superusers set a server's root and its grants.

A location is normalised before it is compared: ``file:`` URIs and plain paths become one
absolute path with ``..`` and symbolic links resolved (a link inside a root that points out of
it is outside), ``s3a://`` and ``s3n://`` are ``s3://``, and an object-store key with a ``.``
or ``..`` segment is refused (Hadoop's paths would resolve it). A JDBC URL must be one of the
granted roots exactly. Scan locations, registered files, export targets and the files a step
reads are all checked here, when they are registered and again when a step runs.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.conf import settings
from django.db.models import Q, QuerySet

from batches.ingest.storage import NOT_OWN, not_own
from bdre.ids import is_id
from processes.models import Server

OBJECT_STORE_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "abfs": "abfs"}


class LocationRefused(ValueError):
    """A location outside the team's roots, or one that cannot be normalised. The message
    names the allowed roots."""


# Characters the check and Spark would read differently: Hadoop keeps what follows ``?`` or
# ``#`` in a path (urlparse drops it, and ``x?/../../other`` then climbs out), and expands
# globs (``{a,../other}``, ``[...]``, ``*``) when it reads. A file whose name holds one would
# be read as a pattern by Spark anyway.
UNSAFE = re.compile(r"[?#{}\[\]*\\\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Root:
    uri: str  # normalised; folders and prefixes end with "/"
    label: str  # where the grant comes from, for the error message
    server: Server | None = None

    def holds(self, normalised: str) -> bool:
        if self.uri.startswith("jdbc:"):
            return normalised == self.uri
        return normalised == self.uri.rstrip("/") or normalised.startswith(self.uri)


def spark_path(uri: str) -> str:
    """A file's or table's URI as Spark reads it: ``s3://`` through the s3a connector."""
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def team_landing(team_id: int) -> Path:
    """The folder where a team's files land (its scans' default root)."""
    return settings.BDRE_LANDING / f"team-{team_id}"


def _team_warehouse(team_id: int) -> Path:
    return settings.BDRE_WAREHOUSE / f"team-{team_id}"


def table_store() -> str | None:
    """``BDRE_TABLE_STORE`` normalised, with a trailing ``/`` (None: the tables are under
    ``BDRE_WAREHOUSE``): every team's tables are in its ``team-<id>/`` folder there."""
    if not settings.BDRE_TABLE_STORE:
        return None
    try:
        return normalise(settings.BDRE_TABLE_STORE).rstrip("/") + "/"
    except LocationRefused:
        return None  # batches.tables.team_tables says why when a table is written


def normalise(location: str) -> str:
    """``location`` as one canonical URI: ``file:///abs/path`` (symlinks and ``..``
    resolved), ``s3://bucket/key``, ``hdfs://host/path``, or a JDBC URL as given."""
    if not location or location != location.strip():
        raise LocationRefused(f"{location!r}: no location, or spaces around it")
    if location.startswith("jdbc:"):
        return location
    if UNSAFE.search(location):
        raise LocationRefused(
            f"{location}: '?', '#', glob characters ({{}}[]*), backslashes and control "
            "characters are not allowed in a location"
        )
    parsed = urlparse(location)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        if scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise LocationRefused(f"{location}: only local file URIs (file:///abs/dir) are allowed")
        path = unquote(parsed.path) if scheme == "file" else location
        if UNSAFE.search(path):
            raise LocationRefused(f"{location}: an encoded character that is not allowed")
        if not path.startswith("/"):
            raise LocationRefused(
                f"{location}: give an absolute path or a URI (file:///..., s3://...)"
            )
        return Path(os.path.realpath(path)).as_uri()
    if scheme in OBJECT_STORE_SCHEMES:
        if not parsed.netloc:
            raise LocationRefused(f"{location}: no bucket")
        segments = parsed.path.split("/")
        if any(s in (".", "..") for s in segments):
            raise LocationRefused(f"{location}: '.' and '..' are not allowed in an object key")
        key = "/".join(s for s in segments if s)
        trailing = "/" if parsed.path.endswith("/") and key else ""
        return f"{OBJECT_STORE_SCHEMES[scheme]}://{parsed.netloc.lower()}/{key}{trailing}"
    if scheme == "hdfs":
        path = posixpath.normpath(parsed.path or "/")
        if path.startswith("/.."):
            raise LocationRefused(f"{location}: '..' above the root")
        return f"hdfs://{parsed.netloc.lower()}{path}"
    raise LocationRefused(
        f"{location}: unsupported location (use an absolute path, file:///..., s3://... or a "
        "granted jdbc: URL)"
    )


def _as_root(server: Server) -> Root | None:
    try:
        normalised = normalise(server.root)
    except LocationRefused:
        return None  # a broken root grants nothing; check_locations reports it
    if not normalised.startswith("jdbc:") and not normalised.endswith("/"):
        normalised += "/"
    return Root(normalised, f"server {server.name}", server)


def grants_storage(server: Server) -> bool:
    """Whether ``server`` grants a root (to its team or others): an installation
    superuser's to create, change and delete."""
    return bool(server.root) or server.granted_teams.exists()


def granted_servers(team_id: int) -> QuerySet[Server]:
    """The servers a team may use: its own and those granted to it."""
    return Server.objects.filter(Q(team_id=team_id) | Q(granted_teams=team_id)).distinct()


class TeamStorage:
    """A team's roots and servers, read once: check as many locations as needed with them
    (a step's files, a scan's pages)."""

    def __init__(self, team_id: int):
        self.team_id = team_id
        self.servers = {s.pk: s for s in granted_servers(team_id).order_by("name")}
        self.roots = [
            Root(team_landing(team_id).as_uri() + "/", "the team's landing folder"),
            Root(_team_warehouse(team_id).as_uri() + "/", "the team's warehouse folder"),
        ]
        # With the tables on an object store, the team's folder there is its own too, and
        # no granted root (a server over the same bucket) reaches the other teams' tables.
        self.table_store = table_store()
        if self.table_store:
            self.roots.append(Root(f"{self.table_store}team-{team_id}/", "the team's tables"))
        self.areas = self._bdre_areas()
        self.roots += [r for s in self.servers.values() if s.root and (r := _as_root(s))]

    def server(self, ref: str) -> Server:
        """The team's server named ``ref`` (a name or an id); its own before a granted one."""
        found = [
            s for s in self.servers.values() if (str(s.pk) == ref if is_id(ref) else s.name == ref)
        ]
        found.sort(key=lambda s: s.team_id != self.team_id)
        if not found:
            raise LocationRefused(f"server {ref!r} is not a server of the team")
        return found[0]

    def check(self, location: str, *, server: Server | None = None) -> str:
        """The normalised ``location`` if it lies inside one of the roots (inside
        ``server``'s root when one is named and has a root: its credentials are for that
        root), else :class:`LocationRefused` naming the allowed roots."""
        if server is not None and server.pk not in self.servers:
            raise LocationRefused(f"server {server.pk} is not a server of the team")
        try:
            normalised = normalise(location)
        except LocationRefused as exc:
            raise LocationRefused(f"{exc}; allowed roots: {self._listed(self.roots)}") from exc
        roots = self.roots
        if server is not None and server.root:
            roots = [r for r in roots if r.server is not None and r.server.pk == server.pk]
        if not any(root.holds(normalised) for root in roots):
            raise LocationRefused(
                f"{location} is outside the storage granted to the team; allowed roots: "
                f"{self._listed(roots)}. An installation superuser grants more roots as "
                "servers (docs/security.md)."
            )
        folder = normalised.rstrip("/") + "/"
        for area, setting in self.areas:
            own = f"{area}team-{self.team_id}/"
            if folder.startswith(area) and not folder.startswith(own):
                raise LocationRefused(
                    f"{location} is in {setting} outside the team's folder {own}: the other "
                    "teams' folders there (and BDRE's own) are not a location to name"
                )
        return normalised

    def check_file(self, path: str, *, server: Server | None = None) -> str:
        """:meth:`check` of a registered file about to be read and, on a local filesystem,
        that its name is still a file of the folder's own (``batches.ingest.storage.not_own``):
        not replaced since its scan by a hard link (another name of a file, maybe in another
        team's folder, where the path check sees only this one), a symbolic link, a FIFO, a
        socket or a device. The name itself is looked at (``lstat``), not what it leads to; a
        file that is gone is left to the reader to say."""
        normalised = self.check(path, server=server)
        if not normalised.startswith("file:"):
            return normalised
        local = unquote(urlparse(path).path) if path.startswith("file:") else path
        try:
            reason = not_own(os.lstat(local))
        except FileNotFoundError:
            return normalised
        if reason is not None:
            raise LocationRefused(
                f"{path}: {NOT_OWN[reason]}; a step reads only the team's own files "
                "(docs/security.md)"
            )
        return normalised

    def _bdre_areas(self) -> list[tuple[str, str]]:
        """The folders where each team has its own ``team-<id>/``: a location there lies in
        the team's own, whatever granted root (a server's over ``/data``) also holds it."""
        areas = [
            (Path(os.path.realpath(settings.BDRE_LANDING)).as_uri() + "/", "BDRE_LANDING"),
            (Path(os.path.realpath(settings.BDRE_WAREHOUSE)).as_uri() + "/", "BDRE_WAREHOUSE"),
        ]
        return areas + ([(self.table_store, "BDRE_TABLE_STORE")] if self.table_store else [])

    def server_of_file(self, path: str, server_id: int | None) -> Server | None:
        """The server a registered file is read with: one of the team's, or none (its own
        folders); :class:`LocationRefused` for a server the team no longer has."""
        if server_id is None:
            return None
        server = self.servers.get(server_id)
        if server is None:
            raise LocationRefused(f"{path}: its server is not a server of the team")
        return server

    def server_for(self, location: str) -> Server | None:
        """The granted server whose root holds ``location`` most closely: whose credentials
        and endpoint reach it. None inside the team's own folders."""
        normalised = normalise(location)
        holding = [r for r in self.roots if r.server is not None and r.holds(normalised)]
        return max(holding, key=lambda r: len(r.uri)).server if holding else None

    @staticmethod
    def _listed(roots: list[Root]) -> str:
        return ", ".join(f"{r.uri} ({r.label})" for r in roots) or "none"


def check_location(team_id: int, location: str, *, server: Server | None = None) -> str:
    """:meth:`TeamStorage.check` for one location."""
    return TeamStorage(team_id).check(location, server=server)


def scan_server(storage: TeamStorage, props: Mapping[str, str]) -> Server | None:
    """The server a scan lists its location with (credentials, endpoint): ``scan.server`` if
    named, else the granted server whose root holds the location; None inside the team's
    own folders. The location must lie inside the team's roots (inside the named server's
    root). The endpoint is the server's, never a step's: a step's endpoint would send the
    server's signed requests wherever it said."""
    if props.get("endpoint_url"):
        raise LocationRefused(
            "scan.endpoint_url is not a step's to set: the endpoint is the granted server's "
            "(its metainfo endpoint_url=...), which an installation superuser sets"
        )
    server = storage.server(props["server"]) if props.get("server") else None
    # The location is kept as written: the scan state (and its marker) is keyed by it.
    storage.check(props["location"], server=server)
    return server or storage.server_for(props["location"])


def check_scan_locations(storage: TeamStorage, props: Mapping[str, str]) -> None:
    """A scan's location (with its server) and its endpoint, when it names them."""
    if props.get("location") or props.get("endpoint_url"):
        scan_server(storage, {"location": "", **props})


@dataclass(frozen=True)
class StepLocations:
    """The properties of a step kind that name storage (its spec's ``locations``): checked
    at registration (the registry), before each run (the orchestrator) and over stored rows
    (check_locations), all here."""

    group: str  # the config group of the properties
    keys: tuple[str, ...]  # those that name or reach a location
    # how they are checked; by default each named location must lie inside the team's roots
    check: Callable[[TeamStorage, Mapping[str, str]], None] | None = None

    def refuse_outside(
        self, storage: TeamStorage, properties: Mapping[str, Mapping[str, object]]
    ) -> None:
        """:class:`LocationRefused` if a location the properties name lies outside the roots."""
        props = {key: str(value) for key, value in properties.get(self.group, {}).items()}
        if self.check is not None:
            self.check(storage, props)
            return
        for key in self.keys:
            if props.get(key):
                storage.check(props[key])

    def named(self, properties: Mapping[str, Mapping[str, object]]) -> str:
        """The locations the properties name, as a report shows them."""
        props = properties.get(self.group, {})
        return ", ".join(f"{self.group}.{key}={props[key]}" for key in self.keys if props.get(key))


@dataclass(frozen=True)
class Outside:
    kind: str  # "step", "file" or "server"
    row_id: int
    team_id: int | None
    location: str
    reason: str


def storages() -> Callable[[int], TeamStorage]:
    """A team's :class:`TeamStorage` by its id, each read once: for a report over many rows."""
    found: dict[int, TeamStorage] = {}

    def storage_of(team_id: int) -> TeamStorage:
        return found.setdefault(team_id, TeamStorage(team_id))

    return storage_of


def rows_outside() -> Iterator[Outside]:
    """Registered files and servers whose location is outside their team's roots (the
    ``check_locations`` command; the steps' properties are the step kinds' to report:
    processes.step_kinds.checks.steps_outside). Rows registered before roots were enforced,
    or after a grant was taken back."""
    from batches.models import File

    storage_of = storages()
    files = File.objects.select_related("batch__bus_domain", "server").order_by("pk")
    for file in files.iterator():
        domain = file.batch.bus_domain
        file_team = domain.team_id if domain is not None else None
        if file_team is None:
            yield Outside("file", file.pk, None, file.path, "the file's batch has no team")
            continue
        try:
            storage_of(file_team).check(file.path, server=file.server)
        except LocationRefused as exc:
            yield Outside("file", file.pk, file_team, file.path, str(exc))
    for server in Server.objects.exclude(root="").order_by("pk"):
        if _as_root(server) is None:
            yield Outside("server", server.pk, server.team_id, server.root, "not a valid root")
