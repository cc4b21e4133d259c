from __future__ import annotations

from django.contrib import admin

from batches.models import (
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    BatchStatus,
    EtlDriver,
    EventManifest,
    File,
    HiveTable,
    ScanState,
)
from bdre.admin import MasterTableAdmin, ReadOnlyAdmin, ScopedAdmin

admin.site.register(BatchStatus, MasterTableAdmin)

QUEUE_COLUMNS = (
    "id",
    "process",
    "source_process",
    "source_batch",
    "target_batch",
    "batch_state",
    "batch_marking",
    "attempts",
    "insert_ts",
    "start_ts",
    "end_ts",
)
QUEUE_RAW_IDS = ("source_batch", "target_batch", "source_process", "process", "claimed_by")


@admin.register(Batch)
class BatchAdmin(ScopedAdmin):
    list_display = ("id", "batch_type", "bus_domain", "source_instance_exec", "created_ts")
    list_filter = ("batch_type", "bus_domain")
    search_fields = ("=id",)
    raw_id_fields = ("source_instance_exec",)


@admin.register(BatchConsumpQueue)
class BatchConsumpQueueAdmin(ScopedAdmin):
    list_display = QUEUE_COLUMNS
    list_filter = ("batch_state", "process")
    search_fields = ("process__name", "batch_marking", "=source_batch__id", "last_error")
    list_select_related = ("process", "source_process", "batch_state")
    raw_id_fields = QUEUE_RAW_IDS


@admin.register(ArchiveConsumpQueue)
class ArchiveConsumpQueueAdmin(ScopedAdmin):
    list_display = (*QUEUE_COLUMNS, "archived_ts")
    list_filter = ("batch_state", "process")
    search_fields = ("process__name", "batch_marking", "=source_batch__id")
    list_select_related = ("process", "source_process", "batch_state")
    raw_id_fields = QUEUE_RAW_IDS
    date_hierarchy = "archived_ts"


@admin.register(File)
class FileAdmin(ScopedAdmin):
    list_display = ("id", "path", "batch", "server", "file_size", "file_hash", "creation_ts")
    list_filter = ("server",)
    search_fields = ("path", "file_hash", "=batch__id")
    raw_id_fields = ("batch",)


@admin.register(HiveTable)
class HiveTableAdmin(ScopedAdmin):
    list_display = ("dbname", "table_name", "type", "location_type", "location", "bus_domain")
    list_filter = ("type", "location_type", "dbname", "bus_domain")
    search_fields = ("dbname", "table_name", "location", "comments")


@admin.register(EtlDriver)
class EtlDriverAdmin(ScopedAdmin):
    list_display = ("process", "raw_table", "base_table", "raw_view", "insert_type", "drop_raw")
    raw_id_fields = ("process", "raw_table", "base_table", "raw_view")


@admin.register(ScanState)
class ScanStateAdmin(ScopedAdmin):
    list_display = ("process", "location", "marker", "scans", "last_scan_ts", "last_reconcile_ts")
    search_fields = ("process__name", "location", "marker")
    raw_id_fields = ("process",)


@admin.register(EventManifest)
class EventManifestAdmin(ReadOnlyAdmin):
    """The deduplication manifest is written by shred runs only."""

    list_display = ("event_id", "fingerprint", "run_id", "etl_time", "manifest")
    list_filter = ("manifest",)
    search_fields = ("=event_id", "=fingerprint")
