from __future__ import annotations

from rest_framework import serializers

from processes.models import InstanceExec, Process


class ProcessSerializer(serializers.ModelSerializer):
    class Meta:
        model = Process
        fields = (
            "id",
            "name",
            "description",
            "bus_domain",
            "process_type",
            "parent",
            "can_recover",
            "batch_cut_pattern",
            "enqueuing_processes",
            "next_processes",
            "max_retries",
            "lease_seconds",
            "add_ts",
        )
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer):
    exec_state_name = serializers.CharField(source="exec_state.name", read_only=True)

    class Meta:
        model = InstanceExec
        fields = (
            "id",
            "process",
            "parent",
            "exec_state",
            "exec_state_name",
            "start_ts",
            "end_ts",
            "heartbeat_at",
            "lease_expires_at",
            "target_batch",
            "worker",
            "spark_application_id",
            "error",
            "counters",
        )
        read_only_fields = fields


class InitJobInput(serializers.Serializer):
    max_batch = serializers.IntegerField(required=False, allow_null=True, min_value=1)


class HaltJobInput(serializers.Serializer):
    batch_marking = serializers.CharField(required=False, allow_blank=True, max_length=512)
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's run: fenced with 115 if it was reaped."
    )


class TermInput(serializers.Serializer):
    error = serializers.CharField(required=False, allow_blank=True)
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's run: fenced with 115 if it was reaped."
    )


class InitStepInput(serializers.Serializer):
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's job run: fenced with 115 if it was reaped."
    )


class StepInput(serializers.Serializer):
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's step run: fenced with 115 if it was reaped."
    )


class FileInfoSerializer(serializers.Serializer):
    batch_id = serializers.IntegerField()
    path = serializers.CharField()
    file_size = serializers.IntegerField()
    file_hash = serializers.CharField()
    server_id = serializers.IntegerField(allow_null=True)


class StepBatchesSerializer(serializers.Serializer):
    sub_process_id = serializers.IntegerField()
    min_batch_id = serializers.IntegerField()
    max_batch_id = serializers.IntegerField()
    min_batch_marking = serializers.CharField(allow_null=True)
    max_batch_marking = serializers.CharField(allow_null=True)
    batch_ids = serializers.ListField(child=serializers.IntegerField())
    files = FileInfoSerializer(many=True)


class InitJobResultSerializer(serializers.Serializer):
    instance_exec_id = serializers.IntegerField()
    target_batch_id = serializers.IntegerField()
    last_recoverable_sp_id = serializers.IntegerField(allow_null=True)
    target_batch_marking = serializers.CharField()
    is_rerun = serializers.BooleanField()
    skipped_step_ids = serializers.ListField(child=serializers.IntegerField())
    steps = serializers.DictField(
        child=StepBatchesSerializer(), help_text="Per step id: what it has to work on."
    )


class InitStepResultSerializer(serializers.Serializer):
    sub_instance_exec_id = serializers.IntegerField()


class HeartbeatResultSerializer(serializers.Serializer):
    lease_expires_at = serializers.DateTimeField()


class FilesBetweenInput(serializers.Serializer):
    min_batch_id = serializers.IntegerField()
    max_batch_id = serializers.IntegerField()


class ScheduleSerializer(serializers.Serializer):
    """A job's schedule: a cron expression or an interval (in seconds), its time zone,
    whether it is enabled, and whether the job also runs as soon as an upstream job queued a
    batch for it. ``next_run`` is when Beat will run it next."""

    cron = serializers.CharField(required=False, allow_blank=True, default="")
    every_seconds = serializers.IntegerField(required=False, allow_null=True, default=None)
    timezone = serializers.CharField(required=False, default="UTC")
    enabled = serializers.BooleanField(required=False, default=True)
    on_upstream = serializers.BooleanField(required=False, default=False)
    next_run = serializers.DateTimeField(read_only=True, allow_null=True)


class RunQueuedSerializer(serializers.Serializer):
    queued = serializers.IntegerField(help_text="the job queued for a run on the workers")


class TerminatedSerializer(serializers.Serializer):
    terminated_run = serializers.IntegerField()
