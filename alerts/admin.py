from __future__ import annotations

from django.contrib import admin

from alerts.models import Alert, AlertGate, Destination
from bdre.admin import ReadOnlyAdmin, ScopedAdmin


@admin.register(Destination)
class DestinationAdmin(ScopedAdmin):
    list_display = ("team", "channel", "target", "kinds", "created_ts")
    list_filter = ("channel", "team")
    search_fields = ("target",)


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin, ScopedAdmin):
    list_display = ("created_ts", "job", "kind", "channel", "destination", "status", "suppressed")
    list_filter = ("kind", "channel", "status")
    search_fields = ("job__name", "destination", "subject")


@admin.register(AlertGate)
class AlertGateAdmin(ReadOnlyAdmin, ScopedAdmin):
    list_display = ("job", "kind", "last_sent_at", "suppressed")
    list_filter = ("kind",)
