"""Names are per team: a job's or a step's name is unique among the live processes of its
team, an application's or a server's among the team's own (docs/security.md, "Names are per
team")."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from batches.models import File
from processes.models import BusDomain, Process, Server


def lock_teams(*team_ids: int | None) -> None:
    """Hold the teams' rows until the transaction ends, so that checking a team's names and
    inserting them is one step for concurrent registrations in any of its applications (the
    database holds a name only per application). ``FOR NO KEY UPDATE``: inserts that point
    at the team (its applications, members) go on. In id order, before any process row is
    locked, so that two registrations never wait for each other; SQLite serialises writers
    anyway (immediate transactions)."""
    wanted = sorted({pk for pk in team_ids if pk is not None})
    list(
        Group.objects.select_for_update(no_key=True)
        .filter(pk__in=wanted)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def check_names(team: Group, names: Iterable[str], *, exclude: Iterable[int] = ()) -> None:
    """A ValidationError on ``name`` when one of ``names`` is a live process (job or step) of
    ``team`` other than those with ids in ``exclude``. Only the team's own processes are
    looked at, so the answer never tells whether another team uses a name (docs/security.md,
    "Names are per team"). Call it after :func:`lock_teams`."""
    taken = sorted(
        Process.objects.filter(name__in=set(names), deleted=False, bus_domain__team=team)
        .exclude(pk__in=list(exclude))
        .values_list("name", flat=True)
        .distinct()
    )
    if len(taken) == 1:
        raise ValidationError(
            {"name": f"A process named {taken[0]} exists already in team {team}."}
        )
    if taken:
        listed = ", ".join(taken)
        raise ValidationError({"name": f"Processes named {listed} exist already in team {team}."})


def move_files(application: BusDomain, team: Group) -> None:
    """As ``application`` changes team (in the caller's transaction, after
    :func:`check_application_move`): its registered files go with it (a file is registered
    once per team, ``File.team``), so a scan after the move does not register them again."""
    File.objects.filter(batch__bus_domain=application).update(team=team)


def check_application_move(application: BusDomain, team: Group) -> None:
    """A ValidationError on ``team`` when the live processes of ``application`` have names
    that ``team``'s own processes use: they would be two of one name in one team. Call it in
    the transaction that moves the application (the caller is a member of ``team``, whose
    names he may read)."""
    lock_teams(application.team_id, team.pk)
    names = application.processes.filter(deleted=False).values_list("name", flat=True)
    try:
        check_names(team, names, exclude=application.processes.values_list("pk", flat=True))
    except ValidationError as exc:
        raise ValidationError(
            {"team": f"{exc.message_dict['name'][0]} Rename them before moving {application}."}
        ) from exc


def check_name_free(
    model: type[BusDomain] | type[Server], team: Group, name: str, *, instead_of: int | None
) -> None:
    """A ValidationError on ``name`` when ``team`` has a row of ``model`` (an application, a
    server) of that name other than ``instead_of``. Only the team's own rows are looked at
    (docs/security.md, "Names are per team"); the database holds the same rule per team
    (a unique constraint), this says it in words. Call it after :func:`lock_teams`."""
    clash = model.objects.filter(team=team, name=name)
    if instead_of is not None:
        clash = clash.exclude(pk=instead_of)
    if clash.exists():
        noun = str(model._meta.verbose_name)
        article = "An" if noun[0] in "aeiou" else "A"
        raise ValidationError(
            {"name": f"{article} {noun} named {name} exists already in team {team}."}
        )
