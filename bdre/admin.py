from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
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
