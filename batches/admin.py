from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpRequest

from batches import queue
from batches.models import (
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    BatchStatus,
    CatalogState,
    EtlDriver,
    EventManifest,
    File,
    HiveTable,
    Partition,
    PartitionPreview,
    ScanState,
    TableShare,
)
from bdre.admin import MasterTableAdmin, ReadOnlyAdmin, ScopedAdmin, SuperuserOnly
from bdre.errors import BdreError

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
class BatchAdmin(ReadOnlyAdmin, ScopedAdmin):
    """Batches are made by runs and file registration only."""

    list_display = ("id", "batch_type", "bus_domain", "source_instance_exec", "created_ts")
    list_filter = ("batch_type", "bus_domain")
    search_fields = ("=id",)
    raw_id_fields = ("source_instance_exec",)


@admin.register(Partition)
class PartitionAdmin(ReadOnlyAdmin, ScopedAdmin):
    """Partitions are written by steps and published by their jobs only (docs/quality.md)."""

    list_display = ("id", "table", "batch", "state", "rows", "bytes", "step_run", "published_at")
    list_filter = ("state",)
    search_fields = ("=batch__id", "table__table_name")
    raw_id_fields = ("table", "batch", "step_run")


@admin.register(PartitionPreview)
class PartitionPreviewAdmin(ReadOnlyAdmin, ScopedAdmin):
    """A partition's first rows as a Spark worker read them for a user who asked on the
    table's page or through the API (docs/ui.md, "Previews, read by Spark")."""

    list_display = ("id", "partition", "rows", "state", "asked_by", "asked_at", "finished_at")
    list_filter = ("state",)
    search_fields = ("=partition__batch__id", "partition__table__table_name")
    raw_id_fields = ("partition", "asked_by")


@admin.register(BatchConsumpQueue)
class BatchConsumpQueueAdmin(ReadOnlyAdmin, ScopedAdmin):
    """Rows change state through the queue service only (its actions here, as in the API and
    the queue page), with the same checks: an edited state would bypass them (a requeue of
    a row a running job holds)."""

    list_display = QUEUE_COLUMNS
    list_filter = ("batch_state", "process")
    search_fields = ("process__name", "batch_marking", "=source_batch__id", "last_error")
    list_select_related = ("process", "source_process", "batch_state")
    raw_id_fields = QUEUE_RAW_IDS
    actions = ("requeue", "discard")

    def _each_row(self, request, queryset, verb: str, call) -> None:
        done = []
        for pk in queryset.values_list("pk", flat=True):
            try:
                call(pk)
                done.append(str(pk))
            except BdreError as exc:
                self.message_user(request, f"row {pk}: {exc.message}", messages.ERROR)
        if done:
            self.message_user(request, f"{verb}: rows {', '.join(done)}", messages.SUCCESS)

    @admin.action(description="Requeue the selected failed or discarded rows")
    def requeue(self, request, queryset) -> None:
        self._each_row(request, queryset, "Requeued", lambda pk: queue.requeue(pk))

    @admin.action(description="Discard the selected new or failed rows")
    def discard(self, request, queryset) -> None:
        by = request.user.get_username()
        self._each_row(
            request,
            queryset,
            "Discarded",
            lambda pk: queue.discard(pk, "in the admin", by=by),
        )


@admin.register(ArchiveConsumpQueue)
class ArchiveConsumpQueueAdmin(ReadOnlyAdmin, ScopedAdmin):
    """The record of work done, written by the archiver only."""

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
    list_display = (
        "dbname",
        "table_name",
        "team",
        "type",
        "location_type",
        "location",
        "bus_domain",
    )
    list_filter = ("type", "location_type", "dbname", "team", "bus_domain")
    search_fields = ("dbname", "table_name", "location", "comments")
    # The owner and the folder decide who reads and writes the table (batches.tables): set
    # by the steps that write it, never by hand.
    readonly_fields = ("team", "location")


@admin.register(TableShare)
class TableShareAdmin(ScopedAdmin):
    """Read-only grants of a team's table to another team (batches.tables.share)."""

    list_display = ("table", "team", "created_by", "created_ts")
    list_filter = ("team",)
    search_fields = ("table__dbname", "table__table_name")
    raw_id_fields = ("table",)


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


@admin.register(CatalogState)
class CatalogStateAdmin(SuperuserOnly, ReadOnlyAdmin):
    """The published catalog's last sync, its summary and its error (batches.catalog): the
    installation's, no team's, and written by the sync only."""

    list_display = ("synced_at", "running_until", "error")
    readonly_fields = (
        "synced_at",
        "tables_digest",
        "run_watermark",
        "running_until",
        "summary",
        "error",
    )

    # SuperuserOnly lets superusers add and change; this row is the sync's alone.
    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
