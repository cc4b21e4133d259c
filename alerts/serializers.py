from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from alerts import services
from alerts.models import Alert, Destination
from bdre.access import teams


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
    team = serializers.PrimaryKeyRelatedField(queryset=Group.objects.all())

    class Meta:
        model = Destination
        fields = ("id", "team", "channel", "target", "kinds", "created_ts")
        read_only_fields = ("id", "created_ts")
        validators: list = []  # the unique destination is said in validate, in our words

    def validate_team(self, team: Group) -> Group:
        # Another team's id reads as no team at all: nothing tells that it exists.
        request = self.context.get("request")
        if request is not None and not teams(request.user).filter(pk=team.pk).exists():
            raise serializers.ValidationError(f'Invalid pk "{team.pk}" - object does not exist.')
        return team

    def validate(self, attrs: dict) -> dict:
        def current(name: str) -> Any:
            return attrs.get(name, getattr(self.instance, name, None))

        try:
            services.check_new_destination(
                current("team").pk,
                str(current("channel")),
                str(current("target")),
                str(current("kinds") or ""),
                instead_of=self.instance.pk if self.instance is not None else None,
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        return attrs
