"""Alerts: who gets one, the rate limit, the message, the sending and its record, and the
periodic checks (runs past their SLA, jobs without new data).

An alert is raised for a job and a kind (failure, dead_letter, sla, freshness, check). It goes to
the job's own destinations (``alerts.email``, ``alerts.webhook``, for the kinds in
``alerts.on``) and to the destinations of the job's team that take that kind. At most one
alert per (job, kind) passes in ``BDRE_ALERT_MIN_INTERVAL_SECONDS``: the gate's row is
locked while it decides, so two workers raising at once send one; the ones held back are
counted and the next alert says how many. Sending happens after the gate's transaction,
never inside one; every attempt is recorded with its outcome.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from alerts import channels, checks
from alerts.models import Alert, AlertGate, Channel, Destination, Kind
from batches.models import ArchiveConsumpQueue, BatchConsumpQueue
from bdre.access import AnyUser, scope
from processes.models import ExecState, InstanceExec, Process, Property, grouped_properties
from processes.step_kinds import expectations

log = logging.getLogger(__name__)

TITLES = {
    Kind.FAILURE: "run {run} failed",
    Kind.DEAD_LETTER: "input went to the dead letter",
    Kind.SLA: "run {run} is past its SLA",
    Kind.FRESHNESS: "no new data",
    Kind.CHECK: "an expectation failed in run {run}",
}


@dataclass(frozen=True)
class Target:
    channel: str
    destination: str


# --- who gets it ---------------------------------------------------------------------------


def job_rules(job: Process) -> checks.JobRules:
    """The job's ``alerts.*`` properties; a value stored past the registry's check (by hand,
    before it existed) is logged and leaves the job with its team's destinations only."""
    values = grouped_properties(
        Property.objects.filter(process=job, config_group=checks.GROUP)
    ).get(checks.GROUP, {})
    try:
        return checks.job_rules(values)
    except ValueError as exc:
        log.warning("job %s: its alerts properties are ignored: %s", job.pk, exc)
        return checks.JobRules(kinds=())


def targets(job: Process, kind: str) -> list[Target]:
    """Where an alert of ``kind`` about ``job`` goes, each destination once."""
    rules = job_rules(job)
    found: list[Target] = []
    if kind in rules.kinds:
        found += [Target(Channel.EMAIL, address) for address in rules.emails]
        if rules.webhook:
            found.append(Target(Channel.WEBHOOK, rules.webhook))
    for destination in Destination.objects.filter(team_id=job.bus_domain.team_id):
        if destination.accepts(kind):
            found.append(Target(destination.channel, destination.target))
    return list(dict.fromkeys(found))


def _live_job(job_id: int) -> Process | None:
    return (
        Process.objects.select_related("bus_domain__team").live().jobs().filter(pk=job_id).first()
    )


def wants(job_id: int, kind: str) -> bool:
    """Whether an alert of ``kind`` about the job would go anywhere (before a task is sent)."""
    job = _live_job(job_id)
    return job is not None and bool(targets(job, kind))


# --- the rate limit ------------------------------------------------------------------------


@transaction.atomic
def pass_gate(job_id: int, kind: str, key: str = "", now: datetime | None = None) -> int | None:
    """Whether an alert of (job, kind) may go now: the number of alerts held back since the
    last one if it may, None if it is held back (counted) or if ``key`` names the condition
    the gate saw last (not counted again). The gate's row is locked (after its creation by
    whichever caller came first), so that of two callers at once exactly one passes."""
    now = now or timezone.now()
    AlertGate.objects.get_or_create(job_id=job_id, kind=kind)
    gate = AlertGate.objects.select_for_update().get(job_id=job_id, kind=kind)
    if key and gate.last_key == key:
        return None
    window = timedelta(seconds=settings.BDRE_ALERT_MIN_INTERVAL_SECONDS)
    if gate.last_sent_at is not None and now - gate.last_sent_at < window:
        gate.suppressed += 1
        gate.last_key = key
        gate.save(update_fields=["suppressed", "last_key"])
        return None
    held_back = gate.suppressed
    gate.last_sent_at, gate.suppressed, gate.last_key = now, 0, key
    gate.save(update_fields=["last_sent_at", "suppressed", "last_key"])
    return held_back


# --- the message ---------------------------------------------------------------------------


def _url(path: str) -> str:
    return f"{settings.BDRE_BASE_URL}{path}"


def message(
    job: Process, kind: str, *, run_id: int | None, detail: str, suppressed: int, now: datetime
) -> tuple[str, str, dict[str, Any]]:
    """The subject, the e-mail's body and the webhook's JSON (Slack-compatible: ``text``, with
    the same facts as fields)."""
    title = TITLES[Kind(kind)].format(run=run_id)
    subject = f"[BDRE] {job.name}: {title}"
    job_url = _url(reverse("ui-job", args=[job.pk]))
    run_url = _url(reverse("ui-run", args=[run_id])) if run_id is not None else None
    lines = [subject, detail] if detail else [subject]
    if suppressed:
        window = settings.BDRE_ALERT_MIN_INTERVAL_SECONDS
        lines.append(
            f"{suppressed} more alert(s) of this kind were held back since the last one "
            f"(at most one every {window} s)."
        )
    lines.append(f"Job: {job_url}" + (f"  Run: {run_url}" if run_url else ""))
    text = "\n".join(lines)
    team = job.bus_domain.team
    payload: dict[str, Any] = {
        "text": text,
        "kind": str(kind),
        "title": title,
        "detail": detail,
        "job": {"id": job.pk, "name": job.name, "url": job_url},
        "application": job.bus_domain.name,
        "team": {"id": team.pk, "name": team.name},
        "run": {"id": run_id, "url": run_url} if run_id is not None else None,
        "suppressed": suppressed,
        "at": now.isoformat(),
    }
    return subject[:255], text, payload


# --- raising and sending -------------------------------------------------------------------


def raise_alert(
    kind: str,
    job_id: int,
    *,
    run_id: int | None = None,
    detail: str = "",
    key: str = "",
    now: datetime | None = None,
) -> list[Alert]:
    """Send an alert of ``kind`` about the job to each of its destinations, unless the rate
    limit holds it back; returns the alerts recorded (none when held back or unwanted)."""
    now = now or timezone.now()
    job = _live_job(job_id)
    if job is None:
        return []
    found = targets(job, kind)
    if not found:
        return []
    suppressed = pass_gate(job.pk, kind, key, now)
    if suppressed is None:
        return []
    subject, text, payload = message(
        job, kind, run_id=run_id, detail=detail, suppressed=suppressed, now=now
    )
    alerts = Alert.objects.bulk_create(
        Alert(
            job=job,
            team_id=job.bus_domain.team_id,
            run_id=run_id,
            kind=kind,
            channel=target.channel,
            destination=target.destination,
            subject=subject,
            payload=payload,
            suppressed=suppressed,
        )
        for target in found
    )
    for alert in alerts:
        _deliver(alert, subject, text, payload)
    return alerts


def _deliver(alert: Alert, subject: str, text: str, payload: dict[str, Any]) -> None:
    try:
        if alert.channel == Channel.EMAIL:
            channels.send_email(alert.destination, subject, text)
        else:
            channels.post_webhook(alert.destination, payload)
    except channels.DeliveryFailed as exc:
        log.warning("alert %s to %s failed: %s", alert.pk, alert.destination, exc.reason)
        alert.status, alert.error = Alert.Status.FAILED, str(exc)[:2000]
    except Exception:
        # Whatever one destination does, the alert's other destinations still get theirs and
        # this one is recorded as failed, not left pending by a crashed task.
        log.exception("alert %s to %s failed", alert.pk, alert.destination)
        alert.status, alert.error = Alert.Status.FAILED, channels.COULD_NOT_DELIVER
    else:
        alert.status, alert.sent_at = Alert.Status.SENT, timezone.now()
    Alert.objects.filter(pk=alert.pk).update(
        status=alert.status, error=alert.error, sent_at=alert.sent_at
    )


def failed_checks(step_run_id: int) -> tuple[int, str] | None:
    """The job of a step run whose expectations failed rows (warn, drop or fail), and what
    they say, one per line; None when none did."""
    run = InstanceExec.objects.filter(pk=step_run_id).select_related("process").first()
    if run is None or run.process.parent_id is None:
        return None
    lines = [
        f"{run.process.name}: {expectations.described(c)}"
        for c in run.checks
        if expectations.is_failure(c)
    ]
    return (run.process.parent_id, "\n".join(lines)) if lines else None


def dead_letter_jobs(queue_ids: list[int]) -> dict[int, int]:
    """The jobs whose steps own these queue rows, with the number of rows of each."""
    counts: dict[int, int] = {}
    for job_id in BatchConsumpQueue.objects.filter(pk__in=queue_ids).values_list(
        "process__parent_id", flat=True
    ):
        if job_id is not None:
            counts[job_id] = counts.get(job_id, 0) + 1
    return counts


# --- the periodic checks -------------------------------------------------------------------


@dataclass(frozen=True)
class Due:
    kind: str
    job_id: int
    run_id: int | None
    detail: str
    key: str


def _jobs_with(key: str) -> QuerySet[Property]:
    return Property.objects.filter(
        config_group=checks.GROUP,
        key=key,
        process__deleted=False,
        process__parent__isnull=True,
    ).select_related("process")


def late_runs(now: datetime) -> list[Due]:
    """Running job runs older than their job's ``alerts.sla_minutes``."""
    due: list[Due] = []
    for prop in _jobs_with("sla_minutes"):
        rules = job_rules(prop.process)
        if rules.sla_minutes is None:
            continue
        sla = timedelta(minutes=rules.sla_minutes)
        for run in InstanceExec.objects.filter(
            process=prop.process, exec_state_id=ExecState.RUNNING, start_ts__lt=now - sla
        ):
            minutes = int((now - run.start_ts).total_seconds() // 60)
            due.append(
                Due(
                    Kind.SLA,
                    prop.process_id,
                    run.pk,
                    f"running for {minutes} min, its SLA is {rules.sla_minutes:g} min",
                    f"run:{run.pk}",
                )
            )
    return due


def ended_late(run_id: int) -> Due | None:
    """A job run that ended past its job's ``alerts.sla_minutes``: told when it ends, so that
    a run shorter than the check's interval is not missed. Its key is the periodic check's,
    so a run told about while it ran is not told about again."""
    run = (
        InstanceExec.objects.select_related("process")
        .filter(pk=run_id, process__parent__isnull=True, end_ts__isnull=False)
        .first()
    )
    if run is None or run.start_ts is None or run.end_ts is None:
        return None
    rules = job_rules(run.process)
    if rules.sla_minutes is None:
        return None
    took = run.end_ts - run.start_ts
    if took <= timedelta(minutes=rules.sla_minutes):
        return None
    minutes = int(took.total_seconds() // 60)
    return Due(
        Kind.SLA,
        run.process_id,
        run.pk,
        f"took {minutes} min, its SLA is {rules.sla_minutes:g} min",
        f"run:{run.pk}",
    )


def last_new_data(job: Process) -> datetime:
    """When the job last produced a new batch: for a job that scans a location, the newest
    file batch it queued for its downstream steps; for any other, the end of its latest
    successful run. A job that never produced one counts from its registration."""
    scans = job.steps.filter(deleted=False, process_type__job_kind="ingest.scan").exists()
    if scans:
        times = [
            model.objects.filter(source_process=job)
            .order_by("-id")
            .values_list("insert_ts", flat=True)
            .first()
            for model in (BatchConsumpQueue, ArchiveConsumpQueue)
        ]
    else:
        times = [
            InstanceExec.objects.filter(process=job, exec_state_id=ExecState.SUCCESS)
            .order_by("-id")
            .values_list("end_ts", flat=True)
            .first()
        ]
    return max([t for t in times if t is not None] + [job.add_ts])


def stale_jobs(now: datetime) -> list[Due]:
    """Jobs without a new batch for longer than their ``alerts.freshness_hours``; one alert
    per stretch without data (its key is when the data stopped)."""
    due: list[Due] = []
    for prop in _jobs_with("freshness_hours"):
        rules = job_rules(prop.process)
        if rules.freshness_hours is None:
            continue
        last = last_new_data(prop.process)
        if now - last > timedelta(hours=rules.freshness_hours):
            hours = (now - last).total_seconds() / 3600
            due.append(
                Due(
                    Kind.FRESHNESS,
                    prop.process_id,
                    None,
                    f"no new batch for {hours:.1f} h (since {last.isoformat()}); "
                    f"expected within {rules.freshness_hours:g} h",
                    f"since:{last.isoformat()}",
                )
            )
    return due


def run_checks(now: datetime | None = None) -> list[Alert]:
    """Beat's check: alert for every late run and every stale job."""
    now = now or timezone.now()
    sent: list[Alert] = []
    for due in [*late_runs(now), *stale_jobs(now)]:
        sent += raise_alert(
            due.kind, due.job_id, run_id=due.run_id, detail=due.detail, key=due.key, now=now
        )
    return sent


def purge_expired(now: datetime | None = None) -> int:
    """Delete the alerts recorded more than ``BDRE_ALERT_RETENTION_DAYS`` ago; the rate
    limit's gates are kept (they are one row per job and kind, and hold the window)."""
    days = settings.BDRE_ALERT_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = Alert.objects.filter(created_ts__lt=cutoff).delete()
    return deleted


# --- team destinations and what a user sees ------------------------------------------------


def check_destination(channel: str, target: str, kinds: str) -> None:
    """A ValidationError on the field at fault."""
    try:
        if channel == Channel.EMAIL:
            checks.check_email(target, "target")
        elif channel == Channel.WEBHOOK:
            checks.check_webhook(target, "target")
        else:
            raise ValidationError({"channel": f"{channel!r} is not email or webhook"})
    except ValueError as exc:
        raise ValidationError({"target": str(exc)}) from exc
    try:
        checks.check_kinds(kinds, "kinds")
    except ValueError as exc:
        raise ValidationError({"kinds": str(exc)}) from exc


def check_new_destination(
    team_id: int, channel: str, target: str, kinds: str, *, instead_of: int | None = None
) -> None:
    """A destination the team may add (or change ``instead_of`` into): valid, and not one it
    has already. A ValidationError on the field at fault."""
    check_destination(channel, target, kinds)
    same = Destination.objects.filter(team_id=team_id, channel=channel, target=target)
    if instead_of is not None:
        same = same.exclude(pk=instead_of)
    if same.exists():
        team = Group.objects.filter(pk=team_id).values_list("name", flat=True).first()
        raise ValidationError({"target": f"Team {team} has this {channel} destination already."})


def add_destination(team_id: int, channel: str, target: str, kinds: str = "") -> Destination:
    check_new_destination(team_id, channel, target, kinds)
    try:
        with transaction.atomic():
            return Destination.objects.create(
                team_id=team_id, channel=channel, target=target, kinds=kinds
            )
    except IntegrityError:  # the same one added at once by another admin
        check_new_destination(team_id, channel, target, kinds)
        raise


def change_destination(
    destination_id: int, team_id: int, channel: str, target: str, kinds: str = ""
) -> Destination:
    """Change a destination into ``channel``/``target``/``kinds`` of team ``team_id`` (its
    team, or another one of the caller's: the caller has checked his role in both)."""
    check_new_destination(team_id, channel, target, kinds, instead_of=destination_id)
    try:
        with transaction.atomic():
            destination = Destination.objects.select_for_update().get(pk=destination_id)
            destination.team_id = team_id
            destination.channel = channel
            destination.target = target
            destination.kinds = kinds
            destination.save()
            return destination
    except IntegrityError:  # the same one added or changed into at once by another admin
        check_new_destination(team_id, channel, target, kinds, instead_of=destination_id)
        raise


def save_destination(
    team_id: int, channel: str, target: str, kinds: str = "", destination_id: int | None = None
) -> Destination:
    """Add a destination, or change ``destination_id`` into this one: what the API and the
    admin write (the team's page only adds and removes)."""
    if destination_id is None:
        return add_destination(team_id, channel, target, kinds)
    return change_destination(destination_id, team_id, channel, target, kinds)


def remove_destination(team_id: int, destination_id: int) -> None:
    """Remove one of the team's destinations; another team's id is no destination at all."""
    if not Destination.objects.filter(pk=destination_id, team_id=team_id).delete()[0]:
        raise ValidationError({"destination": "No such destination of the team."})


def team_alerts(user: AnyUser, team_id: int, limit: int = 20) -> list[Alert]:
    """The latest alerts of the team's jobs, if the user may see them (the one selector)."""
    visible = scope(user, Alert.objects.filter(team_id=team_id)).select_related("job")
    return list(visible.order_by("-id")[:limit])


def visible_alerts(user: AnyUser, job: Process, limit: int = 20) -> list[Alert]:
    """The job's latest alerts, if the user may see them (the one selector)."""
    return list(scope(user, Alert.objects.filter(job=job)).order_by("-id")[:limit])
