"""Shared pieces of the REST API: the error body of a BdreError, role checks, and the base of
every team-scoped resource."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError, models
from django.db.models import ProtectedError, RestrictedError
from rest_framework import exceptions, permissions, serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from bdre.access import Role, can, require_role, scope, team_of, teams
from bdre.errors import BdreError, Code, Conflict
from bdre.ids import ID_REGEX

logger = logging.getLogger(__name__)


class ErrorSerializer(serializers.Serializer):
    """The body of every lifecycle error: ``{"code": 104, "message": "..."}``."""

    code = serializers.IntegerField(help_text="BDRE error code, 101-120 (docs/api.md, Error codes)")
    message = serializers.CharField()


OUT_OF_RANGE = (
    "A value is too large: ids and counts are whole numbers from 0 to 2^63 - 1, and a text "
    "is at most as long as its field allows."
)
CONFLICT = (
    "Conflicts with existing data (another request took the same name or key at the same "
    "time): read it again and retry."
)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        # Django would answer an HTML page; a client of the API gets JSON like any error.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response({"detail": f"The body is larger than {limit} bytes."}, status=413)
    if isinstance(exc, BdreError):
        return Response(exc.as_dict(), status=exc.http_status)
    if isinstance(exc, Conflict):
        return Response({"detail": str(exc)}, status=409)
    if isinstance(exc, ProtectedError | RestrictedError):
        rows = exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
        used_by = sorted({str(type(o)._meta.verbose_name_plural) for o in rows})
        detail = f"Still in use by {', '.join(used_by)}: remove those first."
        return Response({"detail": detail}, status=409)
    if isinstance(exc, OverflowError | DataError):
        # A number or text past what the database column holds (an id of 40 digits). The
        # database's own words name its tables and types, not the input: logged, not sent.
        logger.info("A value out of range in %s: %s", context["request"].path, exc)
        return Response({"detail": OUT_OF_RANGE}, status=400)
    if isinstance(exc, IntegrityError):
        # A race past the validation (two requests creating the same name at once).
        logger.info("A conflict in %s: %s", context["request"].path, exc)
        return Response({"detail": CONFLICT}, status=409)
    if isinstance(exc, DjangoValidationError):
        errors = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(errors)
    return drf_exception_handler(exc, context)


def acting_on(
    request: Request, model: type[models.Model], pk: int, *, role: Role, unknown: Code
) -> None:
    """Check that the user may act with ``role`` on row ``pk``: a row the user may not see
    is answered as unknown (404 with ``unknown``'s code, revealing nothing), a visible row
    without the role is 403."""
    obj = model._default_manager.filter(pk=pk).first()
    if obj is None:
        return  # the service answers unknown ids with its own code
    if not scope(request.user, model._default_manager.filter(pk=pk)).exists():
        raise BdreError(unknown, f"{pk}")
    if not can(request.user, obj, role):
        raise exceptions.PermissionDenied(f"This needs the {role.value} role in the owning team.")


class ScopedRelatedField(serializers.PrimaryKeyRelatedField):
    """A reference by id to a team-owned row: only rows the requesting user may see are
    accepted, so another team's id reads as "does not exist" and reveals nothing."""

    def get_queryset(self):
        queryset = super().get_queryset()
        request = self.context.get("request")
        if request is None:  # the CLI and services: no user to scope by
            return queryset
        assert queryset is not None  # a writable related field has one (DRF checks)
        return scope(request.user, queryset)


class TeamField(serializers.PrimaryKeyRelatedField):
    """A team by id among the requesting user's teams: another team's id reads as no team at
    all ("object does not exist"), so nothing tells that it exists."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(queryset=Group.objects.all(), **kwargs)

    def get_queryset(self) -> models.QuerySet[Group]:
        request = self.context.get("request")
        if request is None:  # the CLI and services: no user to scope by
            return Group.objects.all()
        return teams(request.user)


class ScopedViewSet(viewsets.ModelViewSet):
    """CRUD over the rows the user's teams may see (the one selector, ``scope``).

    Reads need the viewer role, creates and updates ``write_role``, deletes ``delete_role``
    in the owning team: a row of another team is a 404, a visible row without the role a
    403. Subclasses give ``base_queryset`` and ``owner_team`` (the team a new or changed
    row will belong to, from the validated input)."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    write_role = Role.DEVELOPER
    delete_role = Role.ADMIN
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def base_queryset(self) -> models.QuerySet:
        raise NotImplementedError

    def owner_team(self, data: dict) -> Group | None:
        raise NotImplementedError

    def get_queryset(self):
        return scope(self.request.user, self.base_queryset())

    def check_object_permissions(self, request: Request, obj: models.Model) -> None:
        super().check_object_permissions(request, obj)
        if request.method in permissions.SAFE_METHODS:
            return
        role = self.delete_role if request.method == "DELETE" else self.write_role
        require_role(request.user, team_of(obj), role)

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        require_role(self.request.user, self.owner_team(serializer.validated_data), self.write_role)
        self.write(serializer, dict(serializer.validated_data))

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        # Moving a row to another team needs the role there as well.
        assert serializer.instance is not None  # an update's serializer holds its row
        data = {**_current(serializer.instance), **serializer.validated_data}
        require_role(self.request.user, self.owner_team(data), self.write_role)
        self.write(serializer, data)

    def write(self, serializer: serializers.BaseSerializer, data: dict[str, Any]) -> None:
        """Write the row (``data``: the input over what is stored, for an update) and leave
        it as ``serializer.instance``. A row with rules of its own is written by its app's
        service, as its pages write it (the subclasses); one without, by the serializer."""
        serializer.save()


def _current(instance: models.Model) -> dict:
    return {f.name: getattr(instance, f.name) for f in instance._meta.concrete_fields}
