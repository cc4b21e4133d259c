"""Which storage locations a team may name: the one place that decides (docs/security.md,
"Storage is granted, not typed").

A team may read and write inside its roots, and nowhere else:

- its own folders, ``<BDRE_LANDING>/team-<id>/`` and ``<BDRE_WAREHOUSE>/team-<id>/``;
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.conf import settings
from django.db.models import Q

from processes.models import Server

OBJECT_STORE_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "abfs": "abfs"}


class LocationRefused(ValueError):
    """A location outside the team's roots, or one that cannot be normalised. The message
    names the allowed roots."""


@dataclass(frozen=True)
class Root:
    uri: str  # normalised; folders and prefixes end with "/"
    label: str  # where the grant comes from, for the error message

    def holds(self, normalised: str) -> bool:
        if self.uri.startswith("jdbc:"):
            return normalised == self.uri
        return normalised == self.uri.rstrip("/") or normalised.startswith(self.uri)


def team_landing(team_id: int) -> Path:
    """The folder where a team's files land (its scans' default root)."""
    return settings.BDRE_LANDING / f"team-{team_id}"


def _team_warehouse(team_id: int) -> Path:
    return settings.BDRE_WAREHOUSE / f"team-{team_id}"


def normalise(location: str, *, base: str = "") -> str:
    """``location`` as one canonical URI: ``file:///abs/path`` (symlinks and ``..``
    resolved), ``s3://bucket/key``, or a JDBC URL as given. A relative path is taken
    relative to ``base`` (a server's root) and refused without one."""
    location = location.strip()
    if not location:
        raise LocationRefused("no location given")
    if location.startswith("jdbc:"):
        return location
    parsed = urlparse(location)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        if scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise LocationRefused(f"{location}: only local file URIs (file:///abs/dir) are allowed")
        path = unquote(parsed.path) if scheme == "file" else location
        if "\x00" in path:
            raise LocationRefused(f"{location!r}: not a path")
        if not path.startswith("/"):
            if not base:
                raise LocationRefused(
                    f"{location}: give an absolute path or a URI (file:///..., s3://...)"
                )
            return normalise(base.rstrip("/") + "/" + path)
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


def _as_root(uri: str, label: str) -> Root | None:
    try:
        normalised = normalise(uri)
    except LocationRefused:
        return None  # a broken root grants nothing; check_locations reports it
    if not normalised.startswith("jdbc:") and not normalised.endswith("/"):
        normalised += "/"
    return Root(normalised, label)


def granted_servers(team_id: int):
    """The servers a team may use: its own and those granted to it."""
    return Server.objects.filter(Q(team_id=team_id) | Q(granted_teams=team_id)).distinct()


def team_roots(team_id: int) -> list[Root]:
    roots = [
        Root(team_landing(team_id).as_uri() + "/", "the team's landing folder"),
        Root(_team_warehouse(team_id).as_uri() + "/", "the team's warehouse folder"),
    ]
    for server in granted_servers(team_id).exclude(root="").order_by("name"):
        root = _as_root(server.root, f"server {server.name}")
        if root is not None:
            roots.append(root)
    return roots


def _refusal(location: str, team_id: int, roots: list[Root]) -> LocationRefused:
    allowed = ", ".join(f"{r.uri} ({r.label})" for r in roots)
    return LocationRefused(
        f"{location} is outside the storage granted to the team; allowed roots: {allowed}. "
        "An installation superuser grants more roots as servers (docs/security.md)."
    )


def check_location(team_id: int, location: str, *, server: Server | None = None) -> str:
    """The normalised ``location`` if it lies inside a root of ``team_id`` (inside
    ``server``'s root when one is named: its credentials are for that root), else
    :class:`LocationRefused` naming the allowed roots."""
    roots = team_roots(team_id)
    if server is not None and not granted_servers(team_id).filter(pk=server.pk).exists():
        raise LocationRefused(f"server {server.pk} is not a server of the team")
    base = server.root if server is not None else ""
    try:
        normalised = normalise(location, base=base)
    except LocationRefused as exc:
        raise LocationRefused(f"{exc}; allowed roots: {_listed(roots)}") from exc
    if server is not None and server.root:
        server_root = _as_root(server.root, f"server {server.name}")
        if server_root is None or not server_root.holds(normalised):
            raise _refusal(location, team_id, [r for r in [server_root] if r])
        return normalised
    if not any(root.holds(normalised) for root in roots):
        raise _refusal(location, team_id, roots)
    return normalised


def _listed(roots: list[Root]) -> str:
    return ", ".join(r.uri for r in roots)


# The step properties that name a location, by kind: (group, key).
LOCATION_PROPERTIES = {
    "ingest.scan": (("scan", "location"),),
    "spark.export": (("export", "location"), ("export", "jdbc_url")),
}


@dataclass(frozen=True)
class Outside:
    kind: str  # "property", "file" or "server"
    row_id: int
    team_id: int | None
    location: str
    reason: str


def rows_outside() -> Iterator[Outside]:
    """Stored rows that name a location outside their team's roots (the ``check_locations``
    command): they were registered before roots were enforced, or a grant was taken back."""
    from batches.models import File
    from processes.models import Property

    def verdict(team_id: int, location: str, server: Server | None = None) -> str:
        try:
            check_location(team_id, location, server=server)
        except LocationRefused as exc:
            return str(exc)
        return ""

    for kind, keys in LOCATION_PROPERTIES.items():
        for group, key in keys:
            rows = Property.objects.filter(
                process__process_type__job_kind=kind,
                process__deleted=False,
                config_group=group,
                key=key,
            ).exclude(value="")
            for prop in rows.select_related("process__bus_domain"):
                team_id = prop.process.bus_domain.team_id
                reason = verdict(team_id, prop.value)
                if reason:
                    yield Outside("property", prop.pk, team_id, prop.value, reason)
    files = File.objects.select_related("batch__bus_domain", "server").order_by("pk")
    for file in files.iterator():
        team_id = file.batch.bus_domain.team_id if file.batch.bus_domain_id else None
        if team_id is None:
            yield Outside("file", file.pk, None, file.path, "the file's batch has no team")
            continue
        reason = verdict(team_id, file.path, file.server)
        if reason:
            yield Outside("file", file.pk, team_id, file.path, reason)
    for server in Server.objects.exclude(root="").order_by("pk"):
        if _as_root(server.root, server.name) is None:
            yield Outside("server", server.pk, server.team_id, server.root, "not a valid root")
