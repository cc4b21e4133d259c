from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from alerts import services
from alerts.channels import COULD_NOT_DELIVER
from alerts.models import Alert, AlertGate, Destination, Kind
from batches import queue
from batches.models import BatchState
from processes import lifecycle
from processes.models import InstanceExec, Process
from tests.helpers.alerts import alerting, fail_once
from tests.helpers.lifecycle import feed, run_job, steps_of

pytestmark = pytest.mark.django_db


def end_run(job: Process, capture) -> None:
    """The running run's steps, then its end, with what its end sends on commit."""
    for step in steps_of(job):
        lifecycle.init_step(step.pk)
        lifecycle.halt_step(step.pk)
    with capture(execute=True):
        lifecycle.halt_job(job.pk)


def test_a_job_failing_three_times_in_the_window_sends_one_email_then_counts_the_rest(
    make_job, smtp, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders", max_retries=10), email="ops@example.com")
    runs = [fail_once(job, f"boom {i}", django_capture_on_commit_callbacks) for i in range(3)]

    assert len(smtp.messages) == 1
    mail = smtp.messages[0]
    assert smtp.recipients == [["ops@example.com"]]
    assert mail["Subject"] == f"[BDRE] orders: run {runs[0]} failed"
    assert "boom 0" in mail.get_payload()
    [alert] = Alert.objects.filter(job=job)
    assert (alert.kind, alert.status, alert.suppressed, alert.run_id) == (
        "failure",
        "sent",
        0,
        runs[0],
    )
    assert AlertGate.objects.get(job=job, kind=Kind.FAILURE).suppressed == 2

    # The window is over: the next failure is sent, and says what was held back.
    AlertGate.objects.filter(job=job).update(last_sent_at=timezone.now() - timedelta(hours=1))
    fail_once(job, "boom 3", django_capture_on_commit_callbacks)
    assert len(smtp.messages) == 2
    assert "2 more alert(s) of this kind were held back" in smtp.messages[1].get_payload()
    assert Alert.objects.filter(job=job).first().suppressed == 2


def test_the_webhook_receives_a_slack_compatible_json_payload(
    make_job, webhook, eager, django_capture_on_commit_callbacks, settings
):
    settings.BDRE_BASE_URL = "https://bdre.example.com"
    job = alerting(make_job("orders", max_retries=10), webhook=webhook.url)
    run = fail_once(job, "division by zero", django_capture_on_commit_callbacks)

    [body] = webhook.posts
    assert webhook.headers[0]["Content-Type"] == "application/json"
    assert body["text"].startswith(f"[BDRE] orders: run {run} failed\ndivision by zero")
    assert body["kind"] == "failure"
    assert body["detail"] == "division by zero"
    assert body["job"] == {
        "id": job.pk,
        "name": "orders",
        "url": f"https://bdre.example.com/jobs/{job.pk}/",
    }
    assert body["run"] == {"id": run, "url": f"https://bdre.example.com/runs/{run}/"}
    assert body["team"]["id"] == job.bus_domain.team_id
    assert body["application"] == job.bus_domain.name
    assert body["suppressed"] == 0
    assert Alert.objects.get(job=job).status == "sent"


def test_team_destinations_get_the_kinds_they_take_besides_the_jobs_own(
    make_job, team, smtp, webhook, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders", max_retries=10), email="owner@example.com")
    Destination.objects.create(team=team.group, channel="webhook", target=webhook.url)
    Destination.objects.create(
        team=team.group, channel="email", target="oncall@example.com", kinds="sla"
    )
    Destination.objects.create(
        team=team.other_group, channel="email", target="marketing@example.com"
    )
    fail_once(job, "boom", django_capture_on_commit_callbacks)

    assert smtp.recipients == [["owner@example.com"]]
    assert [post["kind"] for post in webhook.posts] == ["failure"]
    assert sorted(Alert.objects.values_list("destination", flat=True)) == sorted(
        ["owner@example.com", webhook.url]
    )


def test_a_webhook_that_answers_an_error_is_recorded_as_failed_and_the_status_logged(
    make_job, webhook, eager, django_capture_on_commit_callbacks, caplog
):
    webhook.status = 500
    job = alerting(make_job("orders", max_retries=10), webhook=webhook.url)
    fail_once(job, "boom", django_capture_on_commit_callbacks)
    alert = Alert.objects.get(job=job)
    assert (alert.status, alert.sent_at) == ("failed", None)
    assert alert.error == COULD_NOT_DELIVER
    assert f"alert {alert.pk} to {webhook.url} failed: HTTP 500" in caplog.text


def test_an_unreachable_smtp_server_is_recorded_as_failed_and_the_run_still_fails(
    make_job, settings, eager, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 1, 2
    job = alerting(make_job("orders", max_retries=10), email="ops@example.com")
    run = fail_once(job, "boom", django_capture_on_commit_callbacks)
    assert InstanceExec.objects.get(pk=run).exec_state_id == 6  # FAILED
    alert = Alert.objects.get(job=job)
    assert alert.status == "failed" and "Connection refused" in alert.error


def test_input_that_fails_max_retries_runs_sends_a_dead_letter_alert(
    make_job, smtp, eager, django_capture_on_commit_callbacks
):
    upstream = make_job("landing")
    job = alerting(
        make_job("orders", upstream=[upstream], max_retries=2),
        email="ops@example.com",
        on="dead_letter",
    )
    feed(upstream, ["2026-11-20"])
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            run_job(job, max_batch=5, fail_step=steps_of(job)[0])

    [mail] = smtp.messages
    assert mail["Subject"] == "[BDRE] orders: input went to the dead letter"
    assert "1 queue row(s) went to the dead letter (failed too many runs): step broke" in (
        mail.get_payload()
    )
    assert [a.kind for a in Alert.objects.filter(job=job)] == ["dead_letter"]


def test_discarding_a_row_by_hand_sends_a_dead_letter_alert(
    make_job, webhook, eager, django_capture_on_commit_callbacks
):
    upstream = make_job("landing")
    job = alerting(make_job("orders", upstream=[upstream]), webhook=webhook.url)
    feed(upstream, ["2026-11-20"])
    row = queue.Queue.objects.get(process=steps_of(job)[0], batch_state_id=BatchState.NEW)
    with django_capture_on_commit_callbacks(execute=True):
        queue.discard(row.pk, "a bad file")
    [body] = webhook.posts
    assert body["kind"] == "dead_letter"
    assert (
        body["detail"] == "1 queue row(s) went to the dead letter (discarded by hand): a bad file"
    )


def test_an_expectation_that_failed_rows_alerts_with_each_rule_and_its_counts(
    make_job, webhook, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders", steps=2), webhook=webhook.url)
    run = lifecycle.init_job(job.pk).instance_exec_id
    first, second = steps_of(job)
    checked = lifecycle.init_step(first.pk)
    # What spark_io.write_batch keeps on the run: one rule warned, one passed.
    InstanceExec.objects.filter(pk=checked).update(
        checks=[
            {"table": "orders", "rule": "has_email", "rule_text": "email IS NOT NULL",
             "action": "warn", "checked": 10, "passed": 7, "failed": 3},
            {"table": "orders", "rule": "one_each", "rule_text": "unique(id)",
             "action": "fail", "checked": 10, "passed": 10, "failed": 0},
        ]
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.halt_step(first.pk)
        lifecycle.init_step(second.pk)
        lifecycle.halt_step(second.pk)  # no checks: nothing told
    [body] = webhook.posts
    assert (body["kind"], body["title"]) == ("check", f"an expectation failed in run {run}")
    assert body["detail"] == (
        "orders_s1: orders.has_email (warn: email IS NOT NULL): 3 of 10 rows failed"
    )
    assert body["run"]["id"] == run


def test_a_rolled_back_failure_alerts_nobody(
    make_job, smtp, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders"), email="ops@example.com")
    lifecycle.init_job(job.pk)
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        lifecycle.term_job(job.pk, "boom")
        raise RuntimeError("the caller's transaction rolls back")
    assert callbacks == [] and smtp.messages == []


def test_a_job_without_destinations_sends_no_task(make_job, django_capture_on_commit_callbacks):
    job = make_job("quiet")
    lifecycle.init_job(job.pk)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.term_job(job.pk, "boom")
    assert not services.wants(job.pk, Kind.FAILURE)
    assert not Alert.objects.exists() and not AlertGate.objects.exists()


# --- SLA and freshness -----------------------------------------------------------------------


def test_a_run_past_its_sla_alerts_once_per_run(make_job, webhook):
    job = alerting(make_job("orders"), webhook=webhook.url, sla_minutes="30")
    run = lifecycle.init_job(job.pk).instance_exec_id
    now = timezone.now()
    assert services.run_checks(now + timedelta(minutes=29)) == []

    [alert] = services.run_checks(now + timedelta(minutes=31))
    assert (alert.kind, alert.run_id) == ("sla", run)
    [body] = webhook.posts
    assert body["kind"] == "sla" and body["run"]["id"] == run
    assert body["detail"] == "running for 31 min, its SLA is 30 min"
    # Still late at the next checks, past the rate limit's window too: told once, not counted.
    assert services.run_checks(now + timedelta(minutes=40)) == []
    assert services.run_checks(now + timedelta(hours=3)) == []
    assert len(webhook.posts) == 1
    assert AlertGate.objects.get(job=job, kind="sla").suppressed == 0


def test_a_run_that_ends_past_its_sla_between_two_checks_alerts_once(
    make_job, webhook, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders"), webhook=webhook.url, sla_minutes="30")
    with django_capture_on_commit_callbacks(execute=True):
        run = lifecycle.init_job(job.pk).instance_exec_id
    # It ran for 31 minutes and succeeded before the periodic check came round.
    InstanceExec.objects.filter(pk=run).update(start_ts=timezone.now() - timedelta(minutes=31))
    end_run(job, django_capture_on_commit_callbacks)

    [body] = webhook.posts
    assert (body["kind"], body["run"]["id"]) == ("sla", run)
    assert body["detail"] == "took 31 min, its SLA is 30 min"
    # The check that comes round next knows the run was told about.
    assert services.run_checks() == []
    assert len(webhook.posts) == 1


def test_a_run_told_about_while_it_ran_is_not_told_about_again_when_it_ends(
    make_job, webhook, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders"), webhook=webhook.url, sla_minutes="30")
    with django_capture_on_commit_callbacks(execute=True):
        run = lifecycle.init_job(job.pk).instance_exec_id
    InstanceExec.objects.filter(pk=run).update(start_ts=timezone.now() - timedelta(minutes=45))
    [alert] = services.run_checks()  # the periodic check sees it running late
    assert alert.run_id == run
    # Past the rate limit's window too: the run's end finds the same condition said.
    AlertGate.objects.filter(job=job).update(last_sent_at=timezone.now() - timedelta(hours=2))
    end_run(job, django_capture_on_commit_callbacks)
    assert [p["run"]["id"] for p in webhook.posts] == [run]


def test_a_run_that_ends_within_its_sla_alerts_nobody(
    make_job, webhook, eager, django_capture_on_commit_callbacks
):
    job = alerting(make_job("orders"), webhook=webhook.url, sla_minutes="30", on="sla")
    with django_capture_on_commit_callbacks(execute=True):
        run_job(job)
    assert webhook.posts == [] and not Alert.objects.exists()


def test_a_job_without_new_data_for_longer_than_its_freshness_alerts_once(make_job, smtp):
    job = alerting(make_job("orders"), email="ops@example.com", freshness_hours="2")
    Process.objects.filter(pk=job.pk).update(add_ts=timezone.now() - timedelta(hours=3))
    now = timezone.now()

    [alert] = services.run_checks(now)
    assert alert.kind == "freshness"
    assert smtp.messages[0]["Subject"] == "[BDRE] orders: no new data"
    assert "expected within 2 h" in smtp.messages[0].get_payload()
    assert services.run_checks(now + timedelta(hours=1)) == []

    # New data ends the stretch: nothing to say until the next one is as long.
    run_job(job)
    assert services.run_checks(timezone.now() + timedelta(hours=1)) == []
    later = services.run_checks(timezone.now() + timedelta(hours=2, minutes=1))
    assert [a.kind for a in later] == ["freshness"]
    assert len(smtp.messages) == 2


def test_new_data_of_a_job_that_hands_batches_downstream_is_its_last_successful_run(make_job):
    upstream = make_job("landing")
    make_job("orders", upstream=[upstream])
    assert services.last_new_data(upstream) == upstream.add_ts
    feed(upstream, ["2026-11-20"])
    last = InstanceExec.objects.filter(process=upstream).get().end_ts
    assert services.last_new_data(upstream) == last
