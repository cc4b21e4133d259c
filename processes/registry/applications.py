"""Applications and servers: the team-owned rows a job's registration names. Each write is one
transaction under a lock on the team's row, so that two requests naming the same one at once
get a clear answer, never a constraint's error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction

from batches.locations import LocationRefused, normalise
from processes.models import BusDomain, Server
from processes.registry.names import (
    check_application_move,
    check_name_free,
    lock_teams,
    move_files,
)


@dataclass(frozen=True)
class ApplicationSpec:
    name: str
    team: Group
    description: str = ""
    owner: str = ""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> ApplicationSpec:
        """From a form's or a serializer's data (blank fields may be left out or None)."""
        return cls(
            name=data["name"],
            team=data["team"],
            description=data.get("description") or "",
            owner=data.get("owner") or "",
        )


def check_application(spec: ApplicationSpec, application: BusDomain | None = None) -> None:
    """What :func:`save_application` refuses, for a form to say before it saves too: a name
    the team has, a move to a team that has one of its job names. ``application``: the
    stored row it changes (None, or one not saved yet: a new one). A ValidationError."""
    stored = application if application is not None and application.pk else None
    check_name_free(BusDomain, spec.team, spec.name, instead_of=stored.pk if stored else None)
    if stored is not None and stored.team_id != spec.team.pk:
        check_application_move(stored, spec.team)


def save_application(spec: ApplicationSpec, application_id: int | None = None) -> BusDomain:
    """Create an application, or change ``application_id`` into ``spec``. Moving it to
    another team needs its job names free there and takes its registered files along
    (:func:`~processes.registry.names.move_files`). A ValidationError on the field at fault;
    the caller has checked the user's role in both teams."""
    with transaction.atomic():
        # The teams first, as every registration locks them: two never wait on each other.
        was = BusDomain.objects.filter(pk=application_id or 0).values_list("team_id", flat=True)
        lock_teams(spec.team.pk, *was)
        application = (
            BusDomain.objects.select_for_update().get(pk=application_id)
            if application_id is not None
            else BusDomain()
        )
        check_application(spec, application)
        if application.pk is not None and application.team_id != spec.team.pk:
            move_files(application, spec.team)
        application.name = spec.name
        application.team = spec.team
        application.description = spec.description
        application.owner = spec.owner
        application.save()
    return application


@dataclass(frozen=True)
class ServerSpec:
    """``login_password`` and ``ssh_private_key`` None keep what is stored (they are never
    read back); ``granted_teams`` None keeps the grants."""

    team: Group
    name: str
    server_type: str
    root: str = ""
    metainfo: str = ""
    login_user: str = ""
    server_ip: str = ""
    login_password: str | None = None
    ssh_private_key: str | None = None
    granted_teams: Sequence[Group] | None = None


def check_root(root: str) -> None:
    """A ValidationError on ``root`` for a storage root the locations refuse."""
    if root:
        try:
            normalise(root)
        except LocationRefused as exc:
            raise ValidationError({"root": str(exc)}) from exc


def check_server(spec: ServerSpec, server_id: int | None = None) -> None:
    """What :func:`save_server` refuses: a root outside what locations accept, a name the
    team has. A ValidationError on the field at fault."""
    check_root(spec.root)
    check_name_free(Server, spec.team, spec.name, instead_of=server_id)


def save_server(spec: ServerSpec, server_id: int | None = None) -> Server:
    """Create a server, or change ``server_id`` into ``spec``. Who may grant storage (a root,
    granted teams: installation superusers) is the caller's check, made before any field is
    read so that no answer tells whether a team exists."""
    with transaction.atomic():
        # The teams first (the server's and the one it moves to), as every registration
        # locks them, then the row: two writes never wait on each other.
        was = Server.objects.filter(pk=server_id or 0).values_list("team_id", flat=True)
        lock_teams(spec.team.pk, *was)
        server = (
            Server.objects.select_for_update().get(pk=server_id)
            if server_id is not None
            else Server()
        )
        check_server(spec, server_id)
        server.team = spec.team
        server.name = spec.name
        server.server_type = spec.server_type
        server.root = spec.root
        server.metainfo = spec.metainfo
        server.login_user = spec.login_user
        server.server_ip = spec.server_ip
        if spec.login_password is not None:
            server.login_password = spec.login_password
        if spec.ssh_private_key is not None:
            server.ssh_private_key = spec.ssh_private_key
        server.save()
        if spec.granted_teams is not None:
            server.granted_teams.set(spec.granted_teams)
    return server
