"""Registry rows one at a time: applications, properties, processes (jobs and steps) and
servers. Writes go through ``processes.registry`` (the viewsets call it); these parse."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from batches.locations import grants_storage
from bdre.api import ScopedRelatedField, TeamField
from processes import registry, scan_gate, schedules
from processes.models import (
    BusDomain,
    Process,
    Property,
    Server,
)
from processes.serializers.runs import LastCheckedSerializer, ScheduleSerializer
from processes.workflow import steps_in_order


class ApplicationSerializer(serializers.ModelSerializer):
    """Written by ``processes.registry.save_application`` (names per team, moves)."""

    team = TeamField()
    team_name = serializers.CharField(source="team.name", read_only=True)

    class Meta:
        model = BusDomain
        fields = ("id", "name", "description", "owner", "team", "team_name", "add_ts")
        read_only_fields = ("add_ts",)
        # Not DRF's validator of the (team, name) constraint: the registry says it in words.
        validators: list = []


class PropertySerializer(serializers.ModelSerializer):
    """Written by ``processes.registry.save_property``, checked as a job's properties are."""

    process = ScopedRelatedField(queryset=Process.objects.filter(deleted=False))

    class Meta:
        model = Property
        fields = ("id", "process", "config_group", "key", "value", "description")
        # The lengths of a group and a key are the registry's to say (check_properties).
        extra_kwargs = {"config_group": {"max_length": None}, "key": {"max_length": None}}


class BriefStepSerializer(serializers.ModelSerializer):
    process_type_name = serializers.CharField(source="process_type.name", read_only=True)

    class Meta:
        model = Process
        fields = ("id", "name", "process_type", "process_type_name", "next_processes")


class ProcessSerializer(serializers.ModelSerializer):
    """A job or a step. Writes go through ``processes.registry`` (create, update, delete),
    which checks the rules of the registry and answers each broken one on its field."""

    bus_domain = ScopedRelatedField(queryset=BusDomain.objects.all())
    # The serializer's metaclass moves declared fields off the class: this does not replace
    # Field.parent (the stub sees a class attribute of another type).
    parent = ScopedRelatedField(  # type: ignore[assignment]
        queryset=Process.objects.filter(deleted=False), required=False, allow_null=True
    )
    enqueuing_processes = ScopedRelatedField(
        queryset=Process.objects.filter(deleted=False), many=True, required=False
    )
    next_processes = ScopedRelatedField(
        queryset=Process.objects.filter(deleted=False), many=True, required=False
    )
    process_type_name = serializers.CharField(source="process_type.name", read_only=True)
    application_name = serializers.CharField(source="bus_domain.name", read_only=True)
    is_job = serializers.BooleanField(read_only=True)

    class Meta:
        model = Process
        fields: tuple[str, ...] = (
            "id",
            "name",
            "description",
            "bus_domain",
            "application_name",
            "process_type",
            "process_type_name",
            "parent",
            "is_job",
            "can_recover",
            "batch_cut_pattern",
            "enqueuing_processes",
            "next_processes",
            "max_retries",
            "lease_seconds",
            "process_template",
            "add_ts",
        )
        read_only_fields = ("add_ts", "process_template")

    def changes(self) -> registry.ProcessChanges:
        """The validated input over the current values (a PATCH changes only what it names)."""
        data = self.validated_data
        current = self.instance

        def value(name: str, default: Any) -> Any:
            if name in data:
                return data[name]
            return getattr(current, name) if current is not None else default

        return registry.ProcessChanges(
            name=value("name", ""),
            bus_domain=value("bus_domain", None),
            process_type=value("process_type", None),
            parent=value("parent", None),
            description=value("description", ""),
            can_recover=value("can_recover", True),
            batch_cut_pattern=value("batch_cut_pattern", ""),
            max_retries=value("max_retries", 3),
            lease_seconds=value("lease_seconds", 3600),
            enqueuing=data.get("enqueuing_processes"),
            next=data.get("next_processes"),
        )


class ProcessDetailSerializer(ProcessSerializer):
    steps = serializers.SerializerMethodField()
    properties = PropertySerializer(many=True, read_only=True)
    schedule = serializers.SerializerMethodField()
    last_checked = serializers.SerializerMethodField()

    class Meta(ProcessSerializer.Meta):
        fields = (*ProcessSerializer.Meta.fields, "steps", "properties", "schedule", "last_checked")

    @extend_schema_field(BriefStepSerializer(many=True))
    def get_steps(self, process: Process) -> list[dict]:
        if not process.is_job:
            return []
        # many=True makes a ListSerializer, whose data is a list; the stubs miss that.
        return BriefStepSerializer(steps_in_order(process), many=True).data  # type: ignore[return-value]

    @extend_schema_field(ScheduleSerializer(allow_null=True))
    def get_schedule(self, process: Process) -> dict | None:
        if not process.is_job:
            return None
        return ScheduleSerializer(schedules.schedule_of(process.pk)).data

    @extend_schema_field(LastCheckedSerializer(allow_null=True))
    def get_last_checked(self, process: Process) -> dict | None:
        checked = scan_gate.last_checked(process)
        return LastCheckedSerializer(checked).data if checked is not None else None


class ServerSerializer(serializers.ModelSerializer):
    """Credentials are write-only: they are stored encrypted and never returned; the
    ``has_*`` flags say whether one is set. Written by ``processes.registry.save_server``."""

    team = TeamField()
    login_password = serializers.CharField(
        write_only=True, required=False, allow_blank=True, style={"input_type": "password"}
    )
    ssh_private_key = serializers.CharField(write_only=True, required=False, allow_blank=True)
    has_password = serializers.SerializerMethodField()
    has_ssh_private_key = serializers.SerializerMethodField()
    granted_teams = serializers.PrimaryKeyRelatedField(
        queryset=Group.objects.all(), many=True, required=False
    )

    class Meta:
        model = Server
        fields: tuple[str, ...] = (
            "id",
            "team",
            "server_type",
            "name",
            "root",
            "granted_teams",
            "metainfo",
            "login_user",
            "login_password",
            "ssh_private_key",
            "has_password",
            "has_ssh_private_key",
            "server_ip",
        )
        # The name is checked per team by processes.registry.save_server, in our words.
        validators: list = []

    def to_internal_value(self, data):
        # A root is storage granted to teams: a server that grants one (or is to) is the
        # installation superusers' to create and change, whole: its endpoint, credentials
        # and team decide where the granted teams' steps read and write (docs/security.md,
        # "Storage is granted, not typed"). Refused before any field is read, so no answer
        # tells whether a team id exists.
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if user is not None and not user.is_superuser and hasattr(data, "get"):
            granting = self.instance is not None and grants_storage(self.instance)
            asks = bool(data.get("root")) or bool(data.get("granted_teams"))
            if granting or asks:
                raise PermissionDenied(
                    "Only an installation superuser creates or changes a server that grants "
                    "a storage root (root, granted_teams)."
                )
        return super().to_internal_value(data)

    def get_has_password(self, server: Server) -> bool:
        return bool(server.login_password)

    def get_has_ssh_private_key(self, server: Server) -> bool:
        return bool(server.ssh_private_key)
