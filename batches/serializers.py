from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from batches import catalog, preview
from batches.models import (
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    File,
    HiveTable,
    Partition,
    PartitionPreview,
    TableShare,
)
from bdre.api import ScopedRelatedField


class QueueRowSerializer(serializers.ModelSerializer):
    batch_state_name = serializers.CharField(source="batch_state.name", read_only=True)

    class Meta:
        model = BatchConsumpQueue
        fields: tuple[str, ...] = (
            "id",
            "source_batch",
            "target_batch",
            "source_process",
            "process",
            "insert_ts",
            "start_ts",
            "end_ts",
            "batch_state",
            "batch_state_name",
            "batch_marking",
            "attempts",
            "claimed_by",
            "last_error",
            "discard_reason",
        )
        read_only_fields = fields


class AttemptSerializer(serializers.Serializer):
    run = serializers.IntegerField(help_text="The job run (GET /api/v1/runs/{run}/).")
    start_ts = serializers.DateTimeField()
    end_ts = serializers.DateTimeField(allow_null=True)
    state = serializers.CharField()
    trigger = serializers.CharField(help_text="What started the run; empty on old runs.")
    error = serializers.CharField(help_text="The row's step's error in that run, else the run's.")


class QueueRowDetailSerializer(QueueRowSerializer):
    attempt_history = AttemptSerializer(
        many=True,
        read_only=True,
        help_text="The job runs that worked on the row's claim, oldest first "
        '(docs/operations.md, "Dead letters").',
    )

    class Meta(QueueRowSerializer.Meta):
        fields = (*QueueRowSerializer.Meta.fields, "attempt_history")
        read_only_fields = fields


class BulkQueueInput(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1), min_length=1, max_length=500
    )


class BulkDiscardInput(BulkQueueInput):
    reason = serializers.CharField(max_length=2000)


class RowErrorSerializer(serializers.Serializer):
    code = serializers.IntegerField()
    message = serializers.CharField()


class RowResultSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    ok = serializers.BooleanField()
    row = QueueRowSerializer(allow_null=True)
    error = RowErrorSerializer(allow_null=True)


class BulkResultSerializer(serializers.Serializer):
    results = RowResultSerializer(many=True)


class FileSerializer(serializers.ModelSerializer):
    class Meta:
        model = File
        fields = ("id", "batch", "server", "path", "file_size", "file_hash", "creation_ts")
        read_only_fields = fields


class RegisterFileInput(serializers.Serializer):
    source_process_id = serializers.IntegerField(help_text="The registering job (or its step).")
    path = serializers.CharField(max_length=1024)
    file_size = serializers.IntegerField(min_value=0)
    file_hash = serializers.CharField(max_length=128)
    creation_ts = serializers.DateTimeField()
    server_id = serializers.IntegerField(required=False, allow_null=True)
    batch_marking = serializers.CharField(required=False, allow_blank=True, max_length=512)


class RegisteredSerializer(serializers.Serializer):
    batch_id = serializers.IntegerField()
    queued = QueueRowSerializer(many=True)


class DiscardInput(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


class ArchiveRowSerializer(serializers.ModelSerializer):
    batch_state_name = serializers.CharField(source="batch_state.name", read_only=True)

    class Meta:
        model = ArchiveConsumpQueue
        fields = (
            "id",
            "queue_id",
            # the archive keeps no discard reason: a row is archived once it was consumed
            *[f for f in QueueRowSerializer.Meta.fields[1:] if f != "discard_reason"],
            "archived_ts",
        )
        read_only_fields = fields


class BatchSerializer(serializers.ModelSerializer):
    source_process = serializers.IntegerField(
        source="source_instance_exec.process_id", read_only=True, allow_null=True
    )
    files = serializers.IntegerField(source="file_count", read_only=True)

    class Meta:
        model = Batch
        fields = (
            "id",
            "bus_domain",
            "source_instance_exec",
            "source_process",
            "batch_type",
            "created_ts",
            "files",
        )
        read_only_fields = fields


class TableSerializer(serializers.ModelSerializer):
    shared = serializers.SerializerMethodField(
        help_text="True for another team's table shared with one of your teams (read-only)."
    )
    catalog_name = serializers.SerializerMethodField(
        help_text="Its name in the published catalog (t<team id>_<db>.<table>), where a "
        "user's own SparkSession finds it (docs/operations.md, 'The catalog')."
    )

    class Meta:
        model = HiveTable
        fields = (
            "id",
            "team",
            "dbname",
            "table_name",
            "type",
            "location",
            "batch_id_partition_col",
            "ddl",
            "comments",
            "bus_domain",
            "shared",
            "catalog_name",
        )
        read_only_fields = fields

    def get_shared(self, table: HiveTable) -> bool:
        return table.team_id not in self.context.get("own_team_ids", ())

    def get_catalog_name(self, table: HiveTable) -> str:
        return catalog.catalog_name(table)


class PartitionSerializer(serializers.ModelSerializer):
    job_run = serializers.IntegerField(
        source="step_run.parent_id",
        read_only=True,
        allow_null=True,
        help_text="The job run whose step wrote it (none for a partition adopted from before "
        "attempts had folders of their own).",
    )

    class Meta:
        model = Partition
        fields = (
            "id",
            "batch",
            "state",
            "location",
            "rows",
            "bytes",
            "checks",
            "step_run",
            "job_run",
            "written_at",
            "published_at",
            "replaced_at",
            "removed_at",
        )
        read_only_fields = fields


class PreviewColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(help_text="The column's Spark SQL type (simpleString).")


class PreviewQuerySerializer(serializers.Serializer):
    partition = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    rows = serializers.IntegerField(
        required=False, min_value=1, max_value=preview.MAX_ROWS, default=preview.DEFAULT_ROWS
    )


class PreviewSerializer(serializers.ModelSerializer):
    """The first rows of one partition of a table as a Spark worker read them
    (``batches.preview``), or the state of their read."""

    partition = PartitionSerializer(read_only=True, help_text="The partition read.")
    rows_asked = serializers.IntegerField(source="rows", read_only=True)
    columns = serializers.SerializerMethodField(
        help_text="The columns with their Spark types (the batch column last), once read."
    )
    rows = serializers.ListField(
        source="values",
        read_only=True,
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Each row's values in the columns' order, as text (NULL for a null; a nested "
        "value as JSON; at most 300 characters each), once read.",
    )
    more = serializers.BooleanField(
        read_only=True, help_text="The partition holds more rows than these."
    )
    message = serializers.CharField(
        read_only=True, help_text="Why the rows could not be read (state failed)."
    )

    class Meta:
        model = PartitionPreview
        fields = (
            "id",
            "state",
            "partition",
            "rows_asked",
            "columns",
            "rows",
            "more",
            "message",
            "asked_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = fields

    @extend_schema_field(PreviewColumnSerializer(many=True))
    def get_columns(self, instance: PartitionPreview) -> list[dict[str, str]]:
        return [{"name": name, "type": kind} for name, kind in instance.columns]

    def to_representation(self, instance: PartitionPreview) -> dict[str, Any]:
        data = super().to_representation(instance)
        if preview.given_up(instance):
            # What the next POST records: no worker read it in time; asking again queues it.
            data |= {
                "state": PartitionPreview.State.FAILED,
                "message": preview.given_up_message(instance),
            }
        return data


class TableShareSerializer(serializers.ModelSerializer):
    table = ScopedRelatedField(queryset=HiveTable.objects.all())
    team = serializers.PrimaryKeyRelatedField(
        queryset=Group.objects.all(), help_text="The team whose steps may read the table."
    )

    class Meta:
        model = TableShare
        fields = ("id", "table", "team", "created_ts", "created_by")
        read_only_fields = ("id", "created_ts", "created_by")
