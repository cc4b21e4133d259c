"""Where alerts go (a team's destinations), what was sent (alerts), and the rate limit's
state per job and kind (gates)."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import models


class Kind(models.TextChoices):
    FAILURE = "failure", "run failed"
    DEAD_LETTER = "dead_letter", "dead letter"
    SLA = "sla", "run past its SLA"
    FRESHNESS = "freshness", "no new data"
    CHECK = "check", "expectation failed"


class Channel(models.TextChoices):
    EMAIL = "email"
    WEBHOOK = "webhook"


class Destination(models.Model):
    """Where every job of a team alerts, besides the job's own ``alerts.*`` properties:
    managed by the team's admins."""

    team = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="alert_destinations")
    channel = models.CharField(max_length=16, choices=Channel.choices)
    target = models.CharField(
        max_length=1024, help_text="An e-mail address, or the URL a webhook posts to."
    )
    kinds = models.CharField(
        max_length=128,
        blank=True,
        help_text="A comma list of kinds (failure, dead_letter, sla, freshness, check); "
        "empty: all.",
    )
    created_ts = models.DateTimeField(auto_now_add=True)

    team_lookup = "team"

    class Meta:
        verbose_name = "alert destination"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "channel", "target"], name="alert_destination_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.target}"

    def accepts(self, kind: str) -> bool:
        wanted = [k.strip() for k in self.kinds.split(",") if k.strip()]
        return not wanted or kind in wanted


class Alert(models.Model):
    """One alert sent (or tried) to one destination."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    job = models.ForeignKey("processes.Process", on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(
        "processes.InstanceExec",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    channel = models.CharField(max_length=16, choices=Channel.choices)
    destination = models.CharField(max_length=1024)
    subject = models.CharField(max_length=255)
    payload = models.JSONField(default=dict)
    created_ts = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    suppressed = models.PositiveIntegerField(
        default=0, help_text="Alerts of this job and kind held back since the previous one."
    )

    team_lookup = "team"

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["job", "-id"], name="alert_job_latest")]

    def __str__(self) -> str:
        return f"{self.kind} of job {self.job_id} to {self.destination}"


class AlertGate(models.Model):
    """The rate limit of one (job, kind): when it last let an alert through, how many it
    held back since, and the key of the last condition it saw (a run past its SLA, a
    stretch without data), so that a condition still true at the next check is not counted
    again."""

    job = models.ForeignKey("processes.Process", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    suppressed = models.PositiveIntegerField(default=0)
    last_key = models.CharField(max_length=128, blank=True)

    team_lookup = "job__bus_domain__team"

    class Meta:
        verbose_name = "alert gate"
        constraints = [
            models.UniqueConstraint(fields=["job", "kind"], name="alert_gate_per_job_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of job {self.job_id}"
