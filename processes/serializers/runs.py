"""The lifecycle's and the runs' API: the inputs and answers of init, run, halt and term,
runs with their steps, and logs."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from processes import runs
from processes.models import (
    ExecState,
    InstanceExec,
    ProcessLog,
)


class RunSerializer(serializers.ModelSerializer):
    exec_state_name = serializers.CharField(source="exec_state.name", read_only=True)
    # A plain string: empty on step runs and on runs from before triggers were recorded.
    trigger = serializers.CharField(
        read_only=True,
        help_text="What started a job run: schedule, upstream, manual, retry, backfill, rewind, "
        "reprocess or replay (docs/operations.md); empty on step runs.",
    )
    # Set on the runs of a list page and of a detail by processes.runs.attach_totals.
    duration_seconds = serializers.FloatField(
        read_only=True, allow_null=True, help_text="Seconds from start to end (or to now)."
    )
    batches_in = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="A job run's input batches (the batches it claimed); null on step runs.",
    )
    rows_in = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The counters' rows_in: a job run's summed over its step runs; null if none.",
    )
    rows_out = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The counters' rows_out: a job run's summed over its step runs; null if none.",
    )
    resolved_by = serializers.SerializerMethodField(
        help_text="For a failed job run: the later run of its job that delivered its batch "
        "(the failure is resolved), else null."
    )

    class Meta:
        model = InstanceExec
        fields: tuple[str, ...] = (
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
            "trigger",
            "duration_seconds",
            "batches_in",
            "rows_in",
            "rows_out",
            "worker",
            "spark_application_id",
            "spark_ui_url",
            "spark_conf",
            "error",
            "counters",
            "checks",
            "files_written",
            "resolved_by",
        )
        read_only_fields = fields

    def get_resolved_by(self, run: InstanceExec) -> int | None:
        # Annotated by the runs API's queryset (InstanceExec.objects.with_resolution); a
        # step run has none.
        if run.exec_state_id not in ExecState.failed():
            return None
        return getattr(run, "resolved_by_id", None)


class InitJobInput(serializers.Serializer):
    max_batch = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    force = serializers.BooleanField(
        default=False,
        help_text="Run a paused job anyway (without it: 409, code 116). Its schedule stays paused.",
    )


class RunNowInput(InitJobInput):
    """Run now takes what init-job takes; its own name in the OpenAPI schema."""


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
    paused = serializers.BooleanField(
        read_only=True,
        help_text="the job is paused (POST .../pause/): no trigger starts it, timed schedule "
        "or not; enabled: false in a PUT pauses it too",
    )


class RunStartedSerializer(serializers.Serializer):
    run = serializers.IntegerField(help_text="the new run's id")
    url = serializers.URLField(help_text="the run in the API (also the Location header)")
    page = serializers.URLField(help_text="the run's page")
    target_batch_id = serializers.IntegerField(help_text="the batch the run writes")
    is_rerun = serializers.BooleanField(help_text="a run of a failed run's batches again")


class CheckedStepSerializer(serializers.Serializer):
    step = serializers.CharField()
    checked_at = serializers.DateTimeField()
    location = serializers.CharField()
    after = serializers.CharField(help_text="the marker the listing started after")
    listed = serializers.IntegerField(help_text="keys listed")
    list_calls = serializers.IntegerField()
    new = serializers.IntegerField(help_text="new files found (the check stops at the first)")
    not_ready = serializers.IntegerField(help_text="keys passed over this time")
    reconciled = serializers.BooleanField(help_text="also listed below the marker")


class LastCheckedSerializer(serializers.Serializer):
    """The last check of a job whose first steps scan (docs/operations.md, "Quiet scans")."""

    checked_at = serializers.DateTimeField()
    outcome = serializers.CharField(help_text="nothing_new, started or ran_meanwhile")
    detail = serializers.CharField()
    run = serializers.IntegerField(
        allow_null=True, help_text="the run it started, or the one that started meanwhile"
    )
    quiet_checks = serializers.IntegerField(help_text="checks that started no run, in all")
    steps = CheckedStepSerializer(many=True)


class NothingNewSerializer(serializers.Serializer):
    started = serializers.BooleanField(help_text="false: no run was started")
    outcome = serializers.CharField(help_text="nothing_new, or ran_meanwhile")
    detail = serializers.CharField()
    run = serializers.IntegerField(
        allow_null=True, help_text="with ran_meanwhile, the run another trigger started"
    )
    last_checked = LastCheckedSerializer()


class TerminatedSerializer(serializers.Serializer):
    terminated_run = serializers.IntegerField()


class RunDetailSerializer(RunSerializer):
    steps = serializers.SerializerMethodField()
    process_name = serializers.CharField(source="process.name", read_only=True)

    class Meta(RunSerializer.Meta):
        fields = (*RunSerializer.Meta.fields, "process_name", "plan", "steps")
        read_only_fields = fields

    @extend_schema_field(RunSerializer(many=True))
    def get_steps(self, run: InstanceExec) -> list[dict]:
        children = list(run.step_runs.select_related("exec_state").order_by("id"))
        runs.attach_totals(children)
        # many=True makes a ListSerializer, whose data is a list; the stubs miss that.
        return RunSerializer(children, many=True).data  # type: ignore[return-value]


class LogSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProcessLog
        fields = (
            "id",
            "process",
            "instance_exec",
            "log_category",
            "message_id",
            "message",
            "add_ts",
        )
        read_only_fields = fields


class StepLogQuery(serializers.Serializer):
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="Only the lines with this text (case-insensitive).",
    )
    tail = serializers.IntegerField(
        required=False, min_value=1, max_value=100_000, help_text="Only the last N lines."
    )


class StepLogSerializer(serializers.Serializer):
    step_run = serializers.IntegerField(source="step_run.pk")
    step = serializers.CharField(source="step_run.process.name")
    state = serializers.CharField(source="step_run.exec_state.name")
    lines = serializers.ListField(child=serializers.CharField())
    total_lines = serializers.IntegerField(help_text="Lines in the file.")
    matched = serializers.IntegerField(help_text="Lines matching q (all without q).")
    size = serializers.IntegerField(help_text="The file's size in bytes.")
    cut = serializers.BooleanField(help_text="The middle was cut by BDRE_STEP_LOG_MAX_BYTES.")


class RunLogSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    steps = StepLogSerializer(many=True)
