from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from rest_framework.authtoken.models import TokenProxy

from bdre.access import scope
from bdre.models import ApiToken, Invitation, Membership

# DRF's own tokens authenticate nothing here (bdre.authentication reads ApiToken; the app
# stays installed for the migration that copied its keys): an admin page for them would
# only mislead.
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


class ScopedAdmin(admin.ModelAdmin):
    """Staff who are not superusers see only their teams' rows, through the one selector."""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope(request.user, super().get_queryset(request))


class CheckedForm(forms.ModelForm):
    """The admin's form of a row with rules of its own (a name per team, what a step kind
    runs): :meth:`check` asks the app's service, from the cleaned data, and its errors land
    on the form's fields, as the API and the pages say them. The admin saves the row through
    the same service (:class:`ServiceAdmin`)."""

    # The service says a name or a destination its team has already, in its own words; the
    # model's constraint would say it again in Django's.
    service_checks_unique = True

    def check(self, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean returns its cleaned_data
        if self.errors:  # a field the form could not read: nothing whole to check
            return data
        try:
            self.check(data)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(field if field in self.fields else NON_FIELD_ERRORS, messages)
        return data

    def validate_unique(self) -> None:
        if not self.service_checks_unique:
            super().validate_unique()


class ServiceAdmin(ScopedAdmin):
    """A model admin whose rows are written by their app's service (:meth:`write`), checked
    by it first in the form (:class:`CheckedForm`): one write path for the API, the pages
    and the admin."""

    def write(self, obj: Any) -> Model:
        """Write ``obj`` (the form's values over the stored row) through the service."""
        raise NotImplementedError

    def save_model(
        self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool
    ) -> None:
        obj.pk = self.write(obj).pk


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the system only: shown, never added, changed or deleted by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class MasterTableAdmin(ReadOnlyAdmin):
    """Master tables are seeded by migrations with BDRE's ids."""

    list_display: tuple[str, ...] = ("id", "name", "description")  # the subclasses add columns
    ordering = ("id",)


class SuperuserOnly:
    """Roles decide what everybody may do: only superusers change them here, whatever model
    permissions a staff member was given (the site refuses others already; this holds if a
    site ever lets them in)."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_superuser

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_superuser


@admin.register(Membership)
class MembershipAdmin(SuperuserOnly, ScopedAdmin):
    list_display = ("user", "team", "role", "added_ts")
    list_filter = ("role", "team")
    search_fields = ("user__username", "team__name")
    autocomplete_fields = ("user", "team")


@admin.register(ApiToken)
class ApiTokenAdmin(SuperuserOnly, admin.ModelAdmin):
    """Tokens are issued by their owner (the API tokens page, the API); a superuser may only
    revoke one (delete), e.g. of a user who left."""

    list_display = ("user", "name", "created_ts", "expires_at", "last_used_at")
    search_fields = ("user__username", "name")
    readonly_fields = ("user", "name", "key_digest", "created_ts", "expires_at", "last_used_at")

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Invitation)
class InvitationAdmin(SuperuserOnly, ScopedAdmin):
    """Invitations are sent by a team's admins and answered by their user (the team pages,
    the API); a superuser may only delete one here. He adds a member directly instead."""

    list_display = ("username", "team", "role", "invited_by", "created_ts", "expires_at")
    list_filter = ("role", "team")
    search_fields = ("username", "team__name")
    readonly_fields = ("team", "username", "role", "invited_by", "created_ts", "expires_at")

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
