"""Data: batches, the consumption queue and its archive, files, registered tables."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from bdre.master import MasterTable

SEED_BATCH_ID = 0  # the input of jobs without upstream


class BatchState(models.IntegerChoices):
    NEW = 0
    PROCESSED = 1
    ACCESSED = 2
    FAILED = 3
    DISCARDED = 4  # dead letter: failed max_retries times, claimed again only after a requeue


CLAIMABLE_STATES = (BatchState.NEW, BatchState.FAILED)


class BatchStatus(MasterTable):
    class Meta(MasterTable.Meta):
        verbose_name_plural = "batch statuses"


class Batch(models.Model):
    id = models.BigAutoField(primary_key=True)
    source_instance_exec = models.ForeignKey(
        "processes.InstanceExec",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="produced_batches",
        help_text="The run that produced this batch (none for seed batch 0 and registered files).",
    )
    batch_type = models.CharField(max_length=32, blank=True)
    created_ts = models.DateTimeField(auto_now_add=True)

    bus_domain = models.ForeignKey(
        "processes.BusDomain",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="batches",
        help_text="The application whose process produced or registered the batch.",
    )

    team_lookup = "bus_domain__team"

    class Meta:
        verbose_name_plural = "batches"
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"batch {self.pk}"


class QueueRow(models.Model):
    """The columns shared by the live queue and its archive. Foreign keys carry no automatic
    index: each table declares the indexes its queries need (most target and claimed_by
    values of the live queue are NULL, so those indexes are partial)."""

    source_batch = models.ForeignKey(
        Batch, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    target_batch = models.ForeignKey(
        Batch, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    insert_ts = models.DateTimeField()
    source_process = models.ForeignKey(
        "processes.Process",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    process = models.ForeignKey(
        "processes.Process",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The consuming step.",
        db_index=False,
    )
    start_ts = models.DateTimeField(null=True, blank=True)
    end_ts = models.DateTimeField(null=True, blank=True)
    batch_state = models.ForeignKey(
        BatchStatus, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    batch_marking = models.CharField(max_length=512, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    claimed_by = models.ForeignKey(
        "processes.InstanceExec",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    last_error = models.TextField(blank=True)

    team_lookup = "process__bus_domain__team"

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"batch {self.source_batch_id} for {self.process_id}"


class BatchConsumpQueue(QueueRow):
    # Beside last_error, not over it: a dead letter discarded by hand keeps the error it
    # failed with (archived rows were never discarded: the archive has no such column).
    discard_reason = models.TextField(
        blank=True, help_text="Who discarded the row by hand, and why (empty otherwise)."
    )

    class Meta:
        verbose_name = "queued batch"
        verbose_name_plural = "queue"
        ordering = ["id"]
        constraints = [
            # A batch is queued once per consuming step (also the index of source_batch).
            models.UniqueConstraint(
                fields=["source_batch", "process"], name="queue_unique_batch_per_step"
            ),
        ]
        indexes = [
            # init_job claims a step's claimable (NEW or FAILED) rows oldest first, and finds
            # the oldest of each upstream: partial indexes make both a short ordered scan
            # whatever the depth of the queue.
            models.Index(
                fields=["process", "id"],
                condition=Q(batch_state__in=CLAIMABLE_STATES),
                name="queue_claimable",
            ),
            models.Index(
                fields=["process", "source_process", "id"],
                condition=Q(batch_state__in=CLAIMABLE_STATES),
                name="queue_claimable_by_source",
            ),
            models.Index(fields=["process", "batch_state", "id"], name="queue_step_state_id"),
            # Partial: a full index would be mostly NULLs, and SQLite's statistics would then
            # call it useless and scan the queue instead.
            models.Index(
                fields=["target_batch"],
                condition=Q(target_batch__isnull=False),
                name="queue_target_batch",
            ),
            models.Index(
                fields=["claimed_by"],
                condition=Q(claimed_by__isnull=False),
                name="queue_claimed_by",
            ),
        ]


class ArchiveConsumpQueue(QueueRow):
    queue_id = models.BigIntegerField(help_text="The id the row had in the live queue.")
    archived_ts = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "archived batch"
        verbose_name_plural = "archive"
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["process", "target_batch"], name="archive_step_target"),
            models.Index(fields=["source_batch"], name="archive_source_batch"),
            models.Index(fields=["target_batch"], name="archive_target_batch"),
            models.Index(fields=["claimed_by"], name="archive_claimed_by"),
        ]


class File(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="files")
    server = models.ForeignKey(
        "processes.Server", null=True, blank=True, on_delete=models.PROTECT, related_name="files"
    )
    path = models.CharField(max_length=1024)
    file_size = models.BigIntegerField()
    file_hash = models.CharField(max_length=128)
    creation_ts = models.DateTimeField()
    # The team that registered it (its batch's team). A file is registered once per team: two
    # teams granted one root each register its files for themselves, and neither learns of
    # the other's registration. Null only on rows older than this column whose batch had no
    # application.
    team = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    team_lookup = "batch__bus_domain__team"

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "server", "path", "file_hash"],
                name="file_unique_team_server_path_hash",
            ),
            # NULLs are distinct in a unique index: local files (no server) need their own.
            models.UniqueConstraint(
                fields=["team", "path", "file_hash"],
                condition=Q(server__isnull=True),
                name="file_unique_team_local_path_hash",
            ),
            models.CheckConstraint(condition=Q(file_size__gte=0), name="file_size_not_negative"),
        ]
        indexes = [models.Index(fields=["batch"], name="file_batch")]

    def __str__(self) -> str:
        return self.path


class HiveTable(models.Model):
    class TableType(models.TextChoices):
        TABLE = "table"
        VIEW = "view"

    class LocationType(models.TextChoices):
        INTERNAL = "internal"
        EXTERNAL = "external"

    dbname = models.CharField(max_length=128, default="default")
    table_name = models.CharField(max_length=128)
    type = models.CharField(max_length=8, choices=TableType.choices, default=TableType.TABLE)
    location = models.CharField(max_length=1024, blank=True)
    location_type = models.CharField(
        max_length=16, choices=LocationType.choices, default=LocationType.INTERNAL
    )
    batch_id_partition_col = models.CharField(max_length=128, blank=True)
    ddl = models.TextField(blank=True)
    comments = models.TextField(blank=True)
    # The application whose step last wrote it: a record of who wrote, not of who owns.
    bus_domain = models.ForeignKey(
        "processes.BusDomain", on_delete=models.PROTECT, related_name="tables"
    )
    # The owner (docs/security.md, "Tables belong to a team"). The team, not the application:
    # the team is the boundary, its applications share its tables, and an application moved
    # to another team leaves its tables (and their folders) with the team that wrote them.
    team = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="tables")

    team_lookup = "team"

    class Meta:
        verbose_name = "table"
        ordering = ["dbname", "table_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "dbname", "table_name"], name="table_unique_name_per_team"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dbname}.{self.table_name}"

    def save(self, *args, **kwargs) -> None:
        # A table registered without an owner belongs to its application's team.
        if self.team_id is None and self.bus_domain_id is not None:
            self.team_id = self.bus_domain.team_id
        super().save(*args, **kwargs)


class TableShare(models.Model):
    """``table`` readable by the steps of ``team``: read-only, the only kind of share there
    is (no step ever writes another team's table). Granted and revoked by an admin of the
    table's team (``batches.tables.share``, ``unshare``)."""

    table = models.ForeignKey(HiveTable, on_delete=models.CASCADE, related_name="shares")
    team = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="shared_tables")
    created_ts = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    # Seen and managed by the owning team; the team shared with sees the table, not the row.
    team_lookup = "table__team"

    class Meta:
        verbose_name = "table share"
        ordering = ["table_id", "team_id"]
        constraints = [
            models.UniqueConstraint(fields=["table", "team"], name="table_share_once"),
        ]

    def __str__(self) -> str:
        return f"{self.table} shared with {self.team}"


class EtlDriver(models.Model):
    process = models.OneToOneField(
        "processes.Process", on_delete=models.CASCADE, primary_key=True, related_name="etl_driver"
    )
    raw_table = models.ForeignKey(
        HiveTable, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    base_table = models.ForeignKey(
        HiveTable, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    raw_view = models.ForeignKey(
        HiveTable, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    insert_type = models.CharField(max_length=32, blank=True)
    drop_raw = models.BooleanField(default=False)

    team_lookup = "process__bus_domain__team"

    def __str__(self) -> str:
        return f"etl driver of {self.process}"


class ScanState(models.Model):
    """Where a scan step stands in its location: the marker (every key at or below it was
    registered or deliberately passed over), how many times it was listed (a run's scan or a
    quiet check), for reconciliation, and the last check before a run (docs/operations.md,
    "Quiet scans")."""

    process = models.OneToOneField(
        "processes.Process", on_delete=models.CASCADE, related_name="scan_state"
    )
    location = models.CharField(max_length=1024)
    marker = models.CharField(max_length=1024, blank=True)
    scans = models.PositiveIntegerField(default=0)
    last_scan_ts = models.DateTimeField(null=True, blank=True)
    last_reconcile_ts = models.DateTimeField(null=True, blank=True)
    last_checked_ts = models.DateTimeField(null=True, blank=True)
    last_check = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the last check listed and what came of it: outcome, keys listed, new "
        "files, files not ready, the marker it listed after, the run it started.",
    )
    quiet_checks = models.PositiveIntegerField(
        default=0, help_text="Checks that found nothing new, so started no run."
    )

    team_lookup = "process__bus_domain__team"

    def __str__(self) -> str:
        return f"{self.location} after {self.marker or '(start)'}"


class EventManifest(models.Model):
    """The database backend of the cross-batch deduplication manifest: one row per
    (event id, fingerprint), written by the first run that saw it (an insert that ignores
    conflicts is the check-and-set)."""

    manifest = models.CharField(max_length=64, default="default")
    event_id = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=128)
    run_id = models.BigIntegerField(help_text="The target batch of the run that saw it first.")
    etl_time = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["manifest", "event_id", "fingerprint"], name="manifest_unique_pair"
            ),
        ]
        indexes = [
            models.Index(fields=["manifest", "etl_time"], name="manifest_ttl"),
            # A run replaces what an earlier attempt of it recorded.
            models.Index(fields=["manifest", "run_id"], name="manifest_run"),
        ]

    def __str__(self) -> str:
        return f"{self.event_id}/{self.fingerprint} (run {self.run_id})"


class CatalogState(models.Model):
    """The published catalog's last sync (``batches.catalog``), one row: what the database
    said when it started, so that the periodic task syncs only after a change, and a lease
    so that one sync runs at a time."""

    synced_at = models.DateTimeField(
        null=True, blank=True, help_text="When the last successful sync started."
    )
    tables_digest = models.CharField(max_length=64, blank=True)
    run_watermark = models.BigIntegerField(
        default=0, help_text="The lowest run id that could end after the last sync started."
    )
    running_until = models.DateTimeField(
        null=True, blank=True, help_text="A sync is running; its lease ends then."
    )
    summary = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, help_text="Why the last sync failed, if it did.")

    class Meta:
        verbose_name = "catalog state"

    def __str__(self) -> str:
        return f"catalog synced at {self.synced_at or 'never'}"


class Partition(models.Model):
    """One attempt's partition of a table for one batch (write, audit, publish:
    docs/quality.md). A step writes each partition to a folder of its own under the table
    (``batch_id=<batch>/run-<step run>``), never over one a reader may be reading; the job's
    successful end publishes every partition its steps wrote for its target batch in one
    transaction, replacing the published ones. Readers of other jobs, replays and the
    catalog see only published partitions; the job's own later steps see what its
    successful steps wrote. The reaper removes the files of failed attempts at once and
    those of replaced partitions after a grace period, so that a query planned on them can
    finish (``BDRE_PARTITION_GRACE_SECONDS``)."""

    class State(models.TextChoices):
        WRITTEN = "written", "written, not published"
        PUBLISHED = "published"
        REPLACED = "replaced"
        DISCARDED = "discarded", "discarded (its attempt failed or was superseded)"

    table = models.ForeignKey(HiveTable, on_delete=models.CASCADE, related_name="partitions")
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="partitions")
    step_run = models.ForeignKey(
        "processes.InstanceExec",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="partitions",
        help_text="The step run (the attempt) that wrote it; none for a partition written "
        "before attempts had folders of their own (adopted: batches.partitions.adopt).",
    )
    location = models.CharField(max_length=1200)
    rows = models.BigIntegerField(null=True, blank=True)
    bytes = models.BigIntegerField(null=True, blank=True)
    checks = models.JSONField(
        default=list, blank=True, help_text="The expectations checked on it, as on its run."
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.WRITTEN)
    written_at = models.DateTimeField()
    published_at = models.DateTimeField(null=True, blank=True)
    replaced_at = models.DateTimeField(null=True, blank=True)
    removed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the reaper removed its files."
    )

    team_lookup = "table__team"

    class Meta:
        ordering = ["table_id", "-batch_id", "-id"]
        constraints = [
            # The database, not only the service, keeps a batch to one published partition.
            models.UniqueConstraint(
                fields=["table", "batch"],
                condition=Q(state="published"),
                name="partition_one_published",
            ),
            models.UniqueConstraint(
                fields=["table", "batch", "step_run"], name="partition_one_per_attempt"
            ),
        ]
        indexes = [models.Index(fields=["state", "removed_at"], name="partition_reap")]

    def __str__(self) -> str:
        return f"{self.table} batch {self.batch_id} ({self.state}, run {self.step_run_id})"


class PartitionPreview(models.Model):
    """The first rows of one partition, as a Spark worker read them for a user who asked
    (``batches.preview``): asked on the table's page or through the API, read on the Spark
    queue through the steps' own session and reader, bounded in rows and in time. A
    partition's files never change, so a preview read once is shown again until they are
    removed, and removed with them."""

    class State(models.TextChoices):
        QUEUED = "queued", "waiting for a Spark worker"
        RUNNING = "running", "being read"
        DONE = "done"
        FAILED = "failed"

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="previews")
    rows = models.PositiveIntegerField(help_text="How many rows were asked for.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    columns = models.JSONField(default=list, blank=True, help_text="[name, Spark type] each.")
    values = models.JSONField(default=list, blank=True, help_text="Each row's values, as text.")
    more = models.BooleanField(default=False, help_text="The partition holds more rows.")
    message = models.TextField(blank=True, help_text="Why it could not be read.")
    asked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    asked_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    team_lookup = "partition__table__team"

    class Meta:
        ordering = ["-asked_at", "-id"]
        indexes = [models.Index(fields=["partition", "rows"], name="preview_of_partition")]
        constraints = [
            # One read a partition and row count, waiting, running or done: two users asking
            # at once queue one, on SQLite too, where the service's row lock is no lock.
            models.UniqueConstraint(
                fields=["partition", "rows"],
                condition=~Q(state="failed"),
                name="preview_one_read",
            )
        ]

    def __str__(self) -> str:
        return f"preview of {self.partition} ({self.rows} rows, {self.state})"
