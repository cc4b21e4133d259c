from __future__ import annotations

from rest_framework import serializers

from alerts.models import Alert, Destination
from bdre.api import TeamField


class AlertSerializer(serializers.ModelSerializer):
    job_name = serializers.CharField(source="job.name", read_only=True)

    class Meta:
        model = Alert
        fields = (
            "id",
            "job",
            "job_name",
            "team",
            "run",
            "kind",
            "channel",
            "destination",
            "subject",
            "payload",
            "created_ts",
            "sent_at",
            "status",
            "error",
            "suppressed",
        )
        read_only_fields = fields


class DestinationSerializer(serializers.ModelSerializer):
    """Written by ``alerts.services`` (add, change, remove), as the team's page writes it."""

    team = TeamField()

    class Meta:
        model = Destination
        fields = ("id", "team", "channel", "target", "kinds", "created_ts")
        read_only_fields = ("id", "created_ts")
        validators: list = []  # the services say a destination the team has, in our words
