"""Fields the registry's serializers share: rows named within the requesting user's teams
(by name or id), process types, properties by group."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from bdre.access import scope, teams
from bdre.ids import is_id
from processes.models import (
    BusDomain,
    Process,
    ProcessType,
)


class ProcessTypeField(serializers.Field):
    """A process type by id (``23``) or by name (``"spark-shred"``); shown by name."""

    default_error_messages = {"unknown": "Unknown process type {value!r}."}

    def to_internal_value(self, data: object) -> ProcessType:
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("unknown", value=data)
        found = (
            ProcessType.objects.filter(pk=int(data)).first()
            if isinstance(data, int) or is_id(str(data))
            else ProcessType.objects.filter(name=data).first()
        )
        if found is None:
            self.fail("unknown", value=data)
        return found

    def to_representation(self, value: ProcessType) -> str:
        return value.name


extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(ProcessTypeField)


def _named(field: serializers.Field, rows, data: object, what: str):
    """The row ``data`` names among ``rows``: by id (an integer) or by name.

    Names are per team (docs/security.md, "Names are per team"), and a name resolves within
    the team the request is about: the document's ``team`` (:class:`NamesWithinTeam`), or
    the command line's ``--team``, put in the context as ``team``. Only when the request
    names no team is a name looked for among the rows the requesting user may see (every
    row for the command line); a name that several of them carry is answered with their
    teams, asking for the id or the team, and names only teams the user is in. So a user who
    joins a second team keeps registering in his first by naming it, whatever names the
    second uses."""
    if isinstance(data, bool) or not isinstance(data, int | str) or str(data) == "":
        field.fail("unknown", value=data)
    request = field.context.get("request")
    if request is not None:
        rows = scope(request.user, rows)
    if field.context.get("team") is not None:
        rows = rows.filter(**{rows.model.team_lookup: field.context["team"]})
    key = {"pk": int(data)} if isinstance(data, int) else {"name": data}
    found = list(rows.filter(**key)[:10])
    if not found:
        field.fail("unknown", value=data)
    if len(found) > 1:
        lookup = f"{rows.model.team_lookup}__name"
        teams_of = sorted(set(rows.filter(**key).values_list(lookup, flat=True)))
        whose = "Several of your teams have" if request is not None else "Several teams have"
        raise serializers.ValidationError(
            f"{whose} {what} named {data} ({', '.join(teams_of)}): give its id"
            + (' or the team ("team").' if request is not None else " or the team.")
        )
    return found[0]


class TeamNameField(serializers.Field):
    """One of the requesting user's teams (any team for the command line), by id or name.
    Another team reads as unknown, like a team of no name: the answer tells nothing."""

    default_error_messages = {"unknown": "Unknown team {value!r}."}

    def to_internal_value(self, data: object) -> Group:
        if isinstance(data, bool) or not isinstance(data, int | str) or str(data) == "":
            self.fail("unknown", value=data)
        request = self.context.get("request")
        rows = teams(request.user) if request is not None else Group.objects.all()
        by_id = isinstance(data, int) or is_id(str(data))
        found = rows.filter(**({"pk": int(data)} if by_id else {"name": data})).first()
        if found is None:
            self.fail("unknown", value=data)
        return found

    def to_representation(self, value: Group) -> str:
        return value.name


extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(TeamNameField)


class NamesWithinTeam(serializers.Serializer):
    """A document whose names (its application, upstream jobs) resolve within the team it
    names in ``team``, read before any of them (:func:`_named`)."""

    team = TeamNameField(
        required=False,
        write_only=True,
        help_text="The team (name or id) whose application and upstream jobs the document "
        "names. Needed only when several of your teams use a name the document uses.",
    )

    def to_internal_value(self, data: Any) -> Any:
        named = data.get("team") if hasattr(data, "get") else None
        if named is not None:
            try:
                team = self.fields["team"].run_validation(named)
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"team": exc.detail}) from exc
            if self.context.get("team") not in (None, team):
                raise serializers.ValidationError(
                    {"team": f"The document names team {team.name}, not the one given."}
                )
            self._context = {**self.context, "team": team}
        return super().to_internal_value(data)


class ProcessNameField(serializers.Field):
    """A live job by name (portable between installations) or by id, among the jobs the
    requesting user may see."""

    default_error_messages = {"unknown": "Unknown job {value!r}."}

    def to_internal_value(self, data: object) -> Process:
        rows = Process.objects.filter(deleted=False).select_related("bus_domain__team")
        return _named(self, rows, data, "a job")

    def to_representation(self, value: Process) -> str:
        return value.name


class ApplicationNameField(serializers.Field):
    """An application by name (portable between installations) or by id, among the
    applications the requesting user may see."""

    default_error_messages = {"unknown": "Object with name={value} does not exist."}

    def to_internal_value(self, data: object) -> BusDomain:
        return _named(self, BusDomain.objects.select_related("team"), data, "an application")

    def to_representation(self, value: BusDomain) -> str:
        return value.name


extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(ProcessNameField)


extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(ApplicationNameField)


PROPERTIES_FIELD = serializers.DictField(
    child=serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=10000)),
    required=False,
    default=dict,
    help_text='Properties by config group: {"group": {"key": "value"}}.',
)
