from __future__ import annotations

from typing import Any

from django.contrib import admin

from alerts import services
from alerts.models import Alert, AlertGate, Destination
from bdre.admin import CheckedForm, ReadOnlyAdmin, ScopedAdmin, ServiceAdmin


class DestinationForm(CheckedForm):
    class Meta:
        model = Destination
        fields = ("team", "channel", "target", "kinds")

    def check(self, data: dict[str, Any]) -> None:
        services.check_new_destination(
            data["team"].pk,
            data["channel"],
            data["target"],
            data.get("kinds") or "",
            instead_of=self.instance.pk,
        )


@admin.register(Destination)
class DestinationAdmin(ServiceAdmin):
    form = DestinationForm
    list_display = ("team", "channel", "target", "kinds", "created_ts")
    list_filter = ("channel", "team")
    search_fields = ("target",)

    def write(self, obj: Destination) -> Destination:
        return services.save_destination(obj.team_id, obj.channel, obj.target, obj.kinds, obj.pk)


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin, ScopedAdmin):
    list_display = ("created_ts", "job", "kind", "channel", "destination", "status", "suppressed")
    list_filter = ("kind", "channel", "status")
    search_fields = ("job__name", "destination", "subject")


@admin.register(AlertGate)
class AlertGateAdmin(ReadOnlyAdmin, ScopedAdmin):
    list_display = ("job", "kind", "last_sent_at", "suppressed")
    list_filter = ("kind",)
