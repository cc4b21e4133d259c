"""Django admin for the installation's superusers only. Its pages edit raw rows past the
services' checks (roles, lifecycle, queue): staff who are not superusers, team admins
included, manage their teams in the UI and the API, where those checks hold."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.forms import AuthenticationForm


class SuperuserAdminSite(admin.AdminSite):
    def has_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    # A property, so that the form is imported late (this module loads before the auth
    # models); the stubs declare a plain attribute, which Django only ever reads.
    @property
    def login_form(self) -> type[AuthenticationForm]:  # type: ignore[override]
        from bdre.auth_forms import AdminLoginForm

        return AdminLoginForm


def refuse_unless_superuser(user) -> None:
    if not user.is_superuser:
        raise ValidationError(
            "Django admin is for the installation's superusers; team admins manage their "
            "team's members on the Teams page.",
            code="invalid_login",
        )
