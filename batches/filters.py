"""The filters of the queue, the archive, batches and files."""

from __future__ import annotations

from django_filters import rest_framework as filters

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, File
from bdre.filters import FilterSet, IdFilter, date_range

QUEUE_FIELDS = (
    "process",
    "source_process",
    "batch_state",
    "batch_marking",
    "source_batch",
    "target_batch",
    "claimed_by",
)


class QueueFilter(FilterSet):
    application = IdFilter(field_name="process__bus_domain")
    job = IdFilter(field_name="process__parent", help_text="rows of a job's steps")
    marking = filters.CharFilter(
        field_name="batch_marking", lookup_expr="icontains", help_text="part of the marking"
    )
    inserted = date_range("insert_ts")
    started = date_range("start_ts")
    ended = date_range("end_ts")
    min_attempts = filters.NumberFilter(field_name="attempts", lookup_expr="gte")

    class Meta:
        model = BatchConsumpQueue
        fields = QUEUE_FIELDS


class ArchiveFilter(QueueFilter):
    archived = date_range("archived_ts")

    class Meta:
        model = ArchiveConsumpQueue
        fields = (*QUEUE_FIELDS, "queue_id")


class BatchFilter(FilterSet):
    application = IdFilter(field_name="bus_domain")
    source_process = IdFilter(
        field_name="source_instance_exec__process", help_text="the job whose run produced it"
    )
    created = date_range("created_ts")

    class Meta:
        model = Batch
        fields = ("source_instance_exec", "batch_type")


class FileFilter(FilterSet):
    application = IdFilter(field_name="batch__bus_domain")
    path_contains = filters.CharFilter(field_name="path", lookup_expr="icontains")
    created = date_range("creation_ts")

    class Meta:
        model = File
        fields = ("batch", "server", "path", "file_hash")
