"""REST: the alerts sent (read-only) and the team destinations (managed by team admins)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from rest_framework import viewsets
from rest_framework.serializers import BaseSerializer

from alerts import services
from alerts.models import Alert, Destination
from alerts.serializers import AlertSerializer, DestinationSerializer
from bdre.access import Role, scope
from bdre.api import ScopedViewSet
from bdre.ids import ID_REGEX


class AlertViewSet(viewsets.ReadOnlyModelViewSet):
    """Alerts sent (or tried) for the jobs of the user's teams, newest first, with their
    outcome; filter by job, team, run, kind, channel and status."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = AlertSerializer
    filterset_fields = ("job", "team", "run", "kind", "channel", "status")
    ordering_fields = ("id", "created_ts", "sent_at")

    def get_queryset(self):
        return scope(self.request.user, Alert.objects.select_related("job").order_by("-id"))


class DestinationViewSet(ScopedViewSet):
    """Where every job of a team alerts (an e-mail address or a webhook URL, for some kinds
    or all), besides each job's ``alerts.*`` properties: read by the team's members,
    managed by its admins."""

    serializer_class = DestinationSerializer
    filterset_fields = ("team", "channel")
    ordering_fields = ("id", "created_ts")
    write_role = Role.ADMIN
    delete_role = Role.ADMIN

    def base_queryset(self):
        return Destination.objects.order_by("id")

    def owner_team(self, data: dict) -> Group:
        return data["team"]

    def write(self, serializer: BaseSerializer, data: dict[str, Any]) -> None:
        serializer.instance = services.save_destination(
            data["team"].pk,
            data["channel"],
            data["target"],
            data.get("kinds") or "",
            serializer.instance.pk if serializer.instance is not None else None,
        )

    def perform_destroy(self, instance: Destination) -> None:
        services.remove_destination(instance.team_id, instance.pk)
