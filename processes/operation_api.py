"""The API of operations (``processes.operations``): every backfill, rewind, reprocess and
catch-up of the user's teams, each with its progress batch by batch. Read-only: one starts
from the job's, step's, batch's or file's own action (``processes.replay_api``)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers, viewsets

from bdre.access import scope
from bdre.ids import ID_REGEX
from processes import operations
from processes.models import Operation


class OperationStepSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    job = serializers.CharField()
    batch_id = serializers.IntegerField(
        help_text="the batch built again; for a catch-up, the upstream batch queued"
    )
    level = serializers.IntegerField(help_text="hops downstream of what was asked for")
    state = serializers.ChoiceField(
        choices=[operations.WAITING, operations.RUNNING, operations.FAILED, operations.DONE]
    )
    run_id = serializers.IntegerField(
        allow_null=True, help_text="the latest run of it since the operation started"
    )
    error = serializers.CharField()


class OperationSerializer(serializers.ModelSerializer):
    created_by = serializers.SerializerMethodField(help_text="who started it")
    done = serializers.SerializerMethodField(help_text="batches done")
    total = serializers.SerializerMethodField(help_text="batches in all")
    finished = serializers.SerializerMethodField(help_text="every batch done")
    steps = serializers.SerializerMethodField()

    class Meta:
        model = Operation
        fields = (
            "id",
            "name",
            "kind",
            "bus_domain",
            "asked",
            "rows_put_back",
            "created_by",
            "created_at",
            "done",
            "total",
            "finished",
            "steps",
        )
        read_only_fields = fields

    def _progress(self, operation: Operation) -> operations.Progress:
        # One reading per operation and answer: its four fields agree.
        cache: dict[int, operations.Progress] = self.__dict__.setdefault("_read", {})
        if operation.pk not in cache:
            cache[operation.pk] = operations.progress(operation)
        return cache[operation.pk]

    def get_created_by(self, operation: Operation) -> str | None:
        return operation.created_by.get_username() if operation.created_by else None

    def get_done(self, operation: Operation) -> int:
        return self._progress(operation).done

    def get_total(self, operation: Operation) -> int:
        return self._progress(operation).total

    def get_finished(self, operation: Operation) -> bool:
        return self._progress(operation).finished

    def get_steps(self, operation: Operation) -> list[dict[str, Any]]:
        steps = self._progress(operation).steps
        return list(OperationStepSerializer([s.__dict__ for s in steps], many=True).data)


class OperationViewSet(viewsets.ReadOnlyModelViewSet):
    """Backfills, rewinds, reprocesses and catch-ups, newest first, with their progress."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = OperationSerializer

    def get_queryset(self):
        return scope(self.request.user, Operation.objects.select_related("created_by"))
