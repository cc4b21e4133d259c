"""The registry: applications, processes (jobs and their steps), properties, templates, runs,
logs and servers. Mirrors BDRE's schema, with constraints BDRE left to the application."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Exists, OuterRef, Q, Subquery
from django_celery_beat.models import PeriodicTask

from bdre.errors import BdreError, Code
from bdre.fields import EncryptedTextField, is_readable
from bdre.master import MasterTable

PROCESS_NAME_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9_.\-]+$",
    "Use letters, digits, '_', '.' and '-' only (no spaces).",
)


class ExecState(models.IntegerChoices):
    NOT_RUNNING = 1
    RUNNING = 2
    SUCCESS = 3
    PAUSED = 4
    SUSPENDED = 5
    FAILED = 6
    KILLED = 7
    STARTED = 8

    @classmethod
    def failed(cls) -> tuple[ExecState, ...]:
        """The states of a run that ended without success: a re-run takes its batch over."""
        return (cls.FAILED, cls.KILLED)


class ProcessTypeId(models.IntegerChoices):
    """The process types seeded by migration 0002 (``ProcessType`` rows), by id: job types
    below 10, each job type's step types in its tens, the generic job's in the fifties."""

    INGESTION_JOB = 1, "ingestion-job"
    LOAD_JOB = 2, "load-job"
    SEMANTIC_JOB = 3, "semantic-job"
    EXPORT_JOB = 4, "export-job"
    GENERIC_JOB = 5, "generic-job"
    FILE_SCAN = 11, "file-scan"
    SPARK_LOAD = 21, "spark-load"
    SPARK_CLEANSE = 22, "spark-cleanse"
    SPARK_SHRED = 23, "spark-shred"
    SPARK_SQL = 31, "spark-sql"
    SPARK_EXPORT = 41, "spark-export"
    PYTHON_CALLABLE = 51, "python-callable"
    GENERIC_SCAN = 52, "generic-scan"
    GENERIC_LOAD = 53, "generic-load"
    GENERIC_CLEANSE = 54, "generic-cleanse"
    GENERIC_SHRED = 55, "generic-shred"
    GENERIC_SQL = 56, "generic-sql"
    GENERIC_EXPORT = 57, "generic-export"


class WorkflowKind(models.IntegerChoices):
    STEPS = 0, "steps only"
    STAND_ALONE = 1, "stand-alone"
    CELERY = 2, "celery"


class ExecStatus(MasterTable):
    class Meta(MasterTable.Meta):
        verbose_name = "exec status"
        verbose_name_plural = "exec statuses"


class WorkflowType(MasterTable):
    pass


class ProcessType(MasterTable):
    """Parent types (jobs) have no parent type and no job kind; step types name the
    registered job kind they run."""

    parent_process_type = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="step_types"
    )
    job_kind = models.CharField(max_length=64, blank=True)

    @property
    def is_step_type(self) -> bool:
        return self.parent_process_type_id is not None


class BusDomain(models.Model):
    """An application: a group of processes owned by one team."""

    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    owner = models.CharField(max_length=128, blank=True)
    team = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="bus_domains")
    add_ts = models.DateTimeField(auto_now_add=True)

    team_lookup = "team"

    class Meta:
        verbose_name = "application"
        ordering = ["name", "id"]
        constraints = [
            # Unique per team, not per installation: a name another team took must not be
            # answered with "exists already" (docs/security.md, "Names are per team").
            models.UniqueConstraint(
                fields=["team", "name"], name="application_unique_name_in_team"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ProcessTemplate(models.Model):
    name = models.CharField(max_length=128, validators=[PROCESS_NAME_VALIDATOR])
    description = models.TextField(blank=True)
    add_ts = models.DateTimeField(auto_now_add=True)
    bus_domain = models.ForeignKey(
        BusDomain, on_delete=models.PROTECT, related_name="templates", verbose_name="application"
    )
    process_type = models.ForeignKey(ProcessType, on_delete=models.PROTECT)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="steps"
    )
    can_recover = models.BooleanField(default=True)
    batch_cut_pattern = models.CharField(max_length=128, blank=True)
    next_templates = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="previous_templates"
    )
    workflow_type = models.ForeignKey(
        WorkflowType, on_delete=models.PROTECT, default=WorkflowKind.CELERY
    )
    deleted = models.BooleanField(default=False)

    team_lookup = "bus_domain__team"

    class Meta:
        ordering = ["id"]
        # A job template's name is unique in its application; a step template's only among
        # the steps of its job template (every template saved from one job has its steps'
        # names).
        constraints = [
            models.UniqueConstraint(
                fields=["bus_domain", "name"],
                condition=Q(deleted=False, parent__isnull=True),
                name="template_unique_live_job_name",
            ),
            models.UniqueConstraint(
                fields=["parent", "name"],
                condition=Q(deleted=False, parent__isnull=False),
                name="template_unique_live_step_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ProcessTemplateProperty(models.Model):
    template = models.ForeignKey(
        ProcessTemplate, on_delete=models.CASCADE, related_name="properties"
    )
    config_group = models.CharField(max_length=64)
    key = models.CharField(max_length=128)
    value = models.TextField(blank=True)
    description = models.CharField(max_length=255, blank=True)

    team_lookup = "template__bus_domain__team"

    class Meta:
        verbose_name_plural = "process template properties"
        constraints = [
            models.UniqueConstraint(
                fields=["template", "config_group", "key"], name="template_property_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.config_group}.{self.key}"


class ProcessQuerySet(models.QuerySet["Process"]):
    def live(self) -> ProcessQuerySet:
        """Not deleted (a deleted process keeps its row for its runs' history)."""
        return self.filter(deleted=False)

    def jobs(self) -> ProcessQuerySet:
        """Jobs, not their steps."""
        return self.filter(parent__isnull=True)

    def get_live_job(self, pk: int, *, lock: bool = False) -> Process:
        """The live job ``pk``, its row locked with ``lock``; else 102, whether the id is a
        step's, a deleted job's or no process's. The lock (as every lock of a job's row) is
        ``FOR NO KEY UPDATE``: a mutex of the calls on the job that leaves free the inserts
        of rows referencing it, whose foreign-key checks take ``KEY SHARE`` (``FOR UPDATE``
        blocked them, and a step's transaction waiting so deadlocked with the lock's holder
        waiting for that step's rows)."""
        found = self.live().jobs().filter(pk=pk)
        job = (found.select_for_update(no_key=True) if lock else found).first()
        if job is None:
            raise BdreError(Code.INVALID_PARENT_PROCESS, f"{pk} is not a live job (parent process)")
        return job


class Process(models.Model):
    """A job (``parent`` is null) or one of its steps."""

    name = models.CharField(max_length=128, validators=[PROCESS_NAME_VALIDATOR])
    description = models.TextField(blank=True)
    add_ts = models.DateTimeField(auto_now_add=True)
    bus_domain = models.ForeignKey(
        BusDomain, on_delete=models.PROTECT, related_name="processes", verbose_name="application"
    )
    process_type = models.ForeignKey(ProcessType, on_delete=models.PROTECT)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="steps"
    )
    can_recover = models.BooleanField(
        default=True,
        help_text="A failed run may resume after this step if it succeeded before.",
    )
    enqueuing_processes = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="downstream_steps",
        help_text="Upstream jobs whose output batches this step consumes.",
    )
    batch_cut_pattern = models.CharField(max_length=128, blank=True)
    next_processes = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="previous_processes",
        help_text="A job points at its first steps, a step at the steps after it.",
    )
    workflow_type = models.ForeignKey(
        WorkflowType, on_delete=models.PROTECT, default=WorkflowKind.CELERY
    )
    process_template = models.ForeignKey(
        ProcessTemplate, null=True, blank=True, on_delete=models.SET_NULL
    )
    deleted = models.BooleanField(default=False)
    max_retries = models.PositiveIntegerField(
        default=3, help_text="A queued row is discarded after this many failed runs."
    )
    lease_seconds = models.PositiveIntegerField(default=3600)
    schedule = models.OneToOneField(
        PeriodicTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="process"
    )

    objects = ProcessQuerySet.as_manager()

    team_lookup = "bus_domain__team"

    class Meta:
        verbose_name_plural = "processes"
        ordering = ["id"]
        constraints = [
            # A live name is unique per team (jobs and steps together; docs/security.md,
            # "Names are per team"). A constraint cannot span the join to the application's
            # team, so the database holds it per application and the registry per team
            # (processes.registry.check_names, under a lock on the team's row).
            models.UniqueConstraint(
                fields=["bus_domain", "name"],
                condition=Q(deleted=False),
                name="process_unique_live_name_in_application",
            ),
            models.CheckConstraint(
                condition=~Q(name__contains=" "), name="process_name_without_spaces"
            ),
            models.CheckConstraint(condition=Q(max_retries__gte=1), name="process_max_retries_1"),
            models.CheckConstraint(condition=Q(lease_seconds__gte=1), name="process_lease_1"),
        ]
        indexes = [models.Index(fields=["parent", "deleted"], name="process_parent_deleted")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_job(self) -> bool:
        return self.parent_id is None

    def property_value(self, group: str, key: str) -> str | None:
        """The value of one of its properties, or None."""
        return (
            self.properties.filter(config_group=group, key=key)
            .values_list("value", flat=True)
            .first()
        )


class Property(models.Model):
    process = models.ForeignKey(Process, on_delete=models.CASCADE, related_name="properties")
    config_group = models.CharField(max_length=64)
    key = models.CharField(max_length=128)
    value = models.TextField(blank=True)
    description = models.CharField(max_length=255, blank=True)

    team_lookup = "process__bus_domain__team"

    class Meta:
        verbose_name_plural = "properties"
        ordering = ["process_id", "config_group", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["process", "config_group", "key"], name="property_unique_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.process}: {self.config_group}.{self.key}"


# The config group of a job's schedule properties (its upstream trigger, its pause): the
# schedule service's (processes.schedules), shown and changed in the schedule's own section.
SCHEDULE_GROUP = "schedule"


def grouped_properties(rows: Iterable[Property]) -> dict[str, dict[str, str]]:
    """``{config_group: {key: value}}``: how the registry, the step kinds and the location
    checks read a process's properties. The ``schedule`` group is left out: it is the
    schedule section's, not a property a step reads."""
    grouped: dict[str, dict[str, str]] = {}
    for row in rows:
        if row.config_group == SCHEDULE_GROUP:
            continue
        grouped.setdefault(row.config_group, {})[row.key] = row.value
    return grouped


class Trigger(models.TextChoices):
    """What started a job run. A re-run of a batch that never succeeded is a retry; of one
    that did (rebuilt by a backfill, a rewind or a reprocess, or downstream of one), a
    replay."""

    SCHEDULE = "schedule"
    UPSTREAM = "upstream"
    MANUAL = "manual"
    RETRY = "retry"
    BACKFILL = "backfill"
    REWIND = "rewind"
    REPROCESS = "reprocess"
    REPLAY = "replay"
    CATCH_UP = "catch_up", "catch up"


def _delivered_again(
    job: int | OuterRef, batch: int | OuterRef | None, after: int | OuterRef
) -> models.QuerySet[InstanceExec]:
    """The runs of ``job`` after run ``after`` that built batch ``batch`` again and
    delivered it (a retry, a requeued dead letter and a replay keep a failed run's target
    batch), first first."""
    return InstanceExec.objects.filter(
        process_id=job,
        parent__isnull=True,
        exec_state_id=ExecState.SUCCESS,
        target_batch_id=batch,
        pk__gt=after,
    ).order_by("pk")


def _delivered_after_outer() -> models.QuerySet[InstanceExec]:
    return _delivered_again(OuterRef("process_id"), OuterRef("target_batch_id"), OuterRef("pk"))


class InstanceExecQuerySet(models.QuerySet["InstanceExec"]):
    def with_resolution(self) -> InstanceExecQuerySet:
        """Each run with ``resolved_by_id``: the first later run of its job that delivered
        its batch, or None; for a failed run, the run that resolved it."""
        return self.annotate(resolved_by_id=Subquery(_delivered_after_outer().values("pk")[:1]))

    def unresolved_failures(self) -> InstanceExecQuerySet:
        """Job runs that failed and whose batch no later run of their job delivered: the
        failures that still need someone. A run that failed before it had a batch stays
        one."""
        return self.filter(parent__isnull=True, exec_state_id__in=ExecState.failed()).exclude(
            Exists(_delivered_after_outer())
        )


class InstanceExec(models.Model):
    """A run of a job, or of a step inside a job's run (``parent`` is the job's run)."""

    process = models.ForeignKey(Process, on_delete=models.PROTECT, related_name="runs")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="step_runs"
    )
    start_ts = models.DateTimeField()
    end_ts = models.DateTimeField(null=True, blank=True)
    exec_state = models.ForeignKey(ExecStatus, on_delete=models.PROTECT)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    spark_application_id = models.CharField(max_length=128, blank=True)
    spark_conf = models.JSONField(
        default=dict,
        blank=True,
        help_text="A Spark step run's Spark options, the installation's and its own (secrets "
        "redacted).",
    )
    spark_ui_url = models.CharField(
        max_length=255, blank=True, help_text="The Spark UI of the step's application, if on."
    )
    worker = models.CharField(max_length=255, blank=True)
    error = models.TextField(blank=True)
    counters = models.JSONField(default=dict, blank=True)
    outputs = models.JSONField(
        default=list, blank=True, help_text="The tables a step run wrote (db.table), in order."
    )
    inputs = models.JSONField(
        default=list,
        blank=True,
        help_text="What a step run read, in order: tables (db.table), folders and databases "
        "(their URI).",
    )
    files_written = models.JSONField(
        default=list,
        blank=True,
        help_text="The files a step run wrote outside the warehouse's tables (an export's): "
        "each one's path and bytes.",
    )
    batch_marking = models.CharField(
        max_length=512,
        blank=True,
        help_text="The marking a step gave its run's batch (the days its output holds): the "
        "job's marking when it halts, unless the job's run.batch_marking sets one.",
    )
    checks = models.JSONField(
        default=list,
        blank=True,
        help_text="A step run's expectations, as checked on each table it wrote: rule, "
        "action, checked, passed and failed rows, a few failing keys (docs/quality.md).",
    )
    plan = models.JSONField(
        default=dict,
        blank=True,
        help_text="A job run's bookkeeping: steps skipped as recovered, steps handed out.",
    )
    target_batch = models.ForeignKey(
        "batches.Batch",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runs",
        help_text="The batch a job run produces; a re-run after a failure keeps it.",
    )
    trigger = models.CharField(
        max_length=16,
        choices=Trigger.choices,
        blank=True,
        help_text="What started a job run (empty on step runs and runs from before).",
    )

    objects = InstanceExecQuerySet.as_manager()

    team_lookup = "process__bus_domain__team"

    class Meta:
        verbose_name = "run"
        ordering = ["-id"]
        constraints = [
            # At most one RUNNING instance per process: the database, not a read-then-insert,
            # decides which of two concurrent init_job calls wins.
            models.UniqueConstraint(
                fields=["process"],
                condition=Q(exec_state=ExecState.RUNNING),
                name="one_running_instance_per_process",
            ),
        ]
        indexes = [
            models.Index(fields=["process", "-start_ts"], name="run_process_start"),
            models.Index(fields=["process", "-id"], name="run_process_latest"),
            models.Index(fields=["exec_state", "lease_expires_at"], name="run_state_lease"),
            models.Index(fields=["parent", "process"], name="run_parent_process"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.process}"

    def resolved_by(self) -> InstanceExec | None:
        """The run that delivered the batch this failed job run did not, if one has."""
        if self.exec_state_id not in ExecState.failed() or self.target_batch_id is None:
            return None
        return _delivered_again(self.process_id, self.target_batch_id, self.pk).first()


class ProcessLog(models.Model):
    process = models.ForeignKey(Process, on_delete=models.CASCADE, related_name="logs")
    instance_exec = models.ForeignKey(
        InstanceExec, null=True, blank=True, on_delete=models.CASCADE, related_name="logs"
    )
    log_category = models.CharField(max_length=64, blank=True)
    message_id = models.CharField(max_length=128, blank=True)
    message = models.TextField(blank=True)
    add_ts = models.DateTimeField(auto_now_add=True)

    team_lookup = "process__bus_domain__team"

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["instance_exec", "id"], name="log_run_id")]

    def __str__(self) -> str:
        return f"{self.log_category}/{self.message_id}"


class Server(models.Model):
    """A machine or endpoint that holds files. Credentials are encrypted at rest and never
    returned by any page or API.

    ``root`` is a storage root (``file:///data/in/``, ``s3://bucket/prefix/``, a JDBC URL)
    that only an installation superuser sets: the steps and file registrations of the
    owning team and of ``granted_teams`` may name locations inside it (batches.locations,
    docs/security.md)."""

    team = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="servers")
    server_type = models.CharField(max_length=32, help_text="s3, sftp, hdfs, local, jdbc ...")
    name = models.CharField(max_length=128)
    root = models.CharField(
        max_length=1024,
        blank=True,
        help_text="Storage root granted to the team (and granted_teams): file:///dir/, "
        "s3://bucket/prefix/ or a jdbc: URL. Set by installation superusers only.",
    )
    granted_teams = models.ManyToManyField(
        Group,
        blank=True,
        related_name="granted_servers",
        help_text="Other teams that may read and write inside root (superusers only).",
    )
    metainfo = models.TextField(blank=True, help_text="Endpoint URL, region, bucket ...")
    login_user = models.CharField(max_length=128, blank=True)
    login_password = EncryptedTextField(blank=True)
    ssh_private_key = EncryptedTextField(blank=True)
    server_ip = models.CharField(max_length=255, blank=True)

    # Granted teams see the server (its name and root, never its secrets); only the owning
    # team's admins change it (bdre.access.team_of takes the first path).
    team_lookup = ("team", "granted_teams")

    class Meta:
        ordering = ["name"]
        constraints = [
            # Unique per team, not per installation: a name taken by another team must not
            # be answered with "exists already" (docs/security.md).
            models.UniqueConstraint(fields=["team", "name"], name="server_unique_name_in_team"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def secrets_readable(self) -> bool:
        """False when a stored secret cannot be decrypted with any configured key: it must
        be entered again (bdre.fields.UnreadableSecret)."""
        return is_readable(self.login_password) and is_readable(self.ssh_private_key)


class Operation(models.Model):
    """A backfill, rewind, reprocess or catch-up as one named thing (processes.operations):
    what was asked, the batches it rebuilds or queues (its plan, as it was started), who
    started it and when. Its progress is read from the runs of those batches since then."""

    class Kind(models.TextChoices):
        BACKFILL = "backfill"
        REWIND = "rewind"
        REPROCESS = "reprocess"
        CATCH_UP = "catch_up", "catch up"

    bus_domain = models.ForeignKey(
        BusDomain, on_delete=models.PROTECT, related_name="operations",
        help_text="The application of the job it was asked on.",
    )  # fmt: skip
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200, help_text="The user's, or what was asked, in words.")
    asked = models.JSONField(default=dict, help_text="What was asked, as it was asked.")
    plan = models.JSONField(
        default=list, help_text="The batches it builds: job, batch, hops downstream, partitions."
    )
    rows_put_back = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    team_lookup = "bus_domain__team"

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name
