from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from bdre.access import scope
from bdre.models import Membership


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

    list_display = ("id", "name", "description")
    ordering = ("id",)


@admin.register(Membership)
class MembershipAdmin(ScopedAdmin):
    list_display = ("user", "team", "role", "added_ts")
    list_filter = ("role", "team")
    search_fields = ("user__username", "team__name")
    autocomplete_fields = ("user", "team")
