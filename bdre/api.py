"""Shared pieces of the REST API: the error body of a BdreError and role checks."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from bdre.access import Role, can, scope
from bdre.errors import BdreError, Code


class ErrorSerializer(serializers.Serializer):
    """The body of every lifecycle error: ``{"code": 104, "message": "..."}``."""

    code = serializers.IntegerField(help_text="BDRE error code, 101-115")
    message = serializers.CharField()


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, BdreError):
        return Response(exc.as_dict(), status=exc.http_status)
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(detail)
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
        raise BdreError(unknown, f"{pk}", http_status=404)
    if not can(request.user, obj, role):
        raise exceptions.PermissionDenied(f"This needs the {role.value} role in the owning team.")
