"""A job's alerts.* properties are checked by the registry, wherever they come from."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from alerts import checks
from processes import registry
from tests.helpers.api import api_as

pytestmark = pytest.mark.django_db


def test_the_rules_a_jobs_alerts_properties_hold():
    rules = checks.job_rules(
        {
            "email": "a@example.com, b@example.com",
            "webhook": "https://hooks.slack.com/services/T/B/X",
            "on": "failure, sla",
            "sla_minutes": "45",
            "freshness_hours": "1.5",
        }
    )
    assert rules == checks.JobRules(
        emails=("a@example.com", "b@example.com"),
        webhook="https://hooks.slack.com/services/T/B/X",
        kinds=("failure", "sla"),
        sla_minutes=45.0,
        freshness_hours=1.5,
    )
    assert checks.job_rules({}).kinds == ("failure", "dead_letter", "sla", "freshness", "check")


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"email": "ops@example.com, nobody"}, "alerts.email: 'nobody' is not an e-mail address"),
        ({"webhook": "ftp://example.com/x"}, "is not an http:// or https:// URL with a host"),
        ({"webhook": "http:///no-host"}, "is not an http:// or https:// URL with a host"),
        ({"on": "failure,everything"}, "alerts.on: everything is not a kind of alert"),
        ({"sla_minutes": "soon"}, "alerts.sla_minutes: a positive number of minutes"),
        ({"sla_minutes": "0"}, "alerts.sla_minutes: a positive number of minutes"),
        ({"freshness_hours": "nan"}, "alerts.freshness_hours: a positive number of hours"),
        ({"pager": "yes"}, "alerts.pager is not a setting of alerts"),
    ],
)
def test_registering_a_job_with_a_bad_alerts_property_is_refused(make_job, values, says):
    job = make_job("orders")
    with pytest.raises(ValidationError) as refused:
        registry.set_properties(job, {"alerts": values})
    assert says in refused.value.message_dict["properties"][0]
    assert not job.properties.filter(config_group="alerts").exists()


def test_a_bad_alerts_property_alone_through_the_api_is_a_400(team, make_job):
    job = make_job("orders")
    client = api_as(team.developer)
    answer = client.post(
        "/api/v1/properties/",
        {"process": job.pk, "config_group": "alerts", "key": "webhook", "value": "file:///x"},
        format="json",
    )
    assert answer.status_code == 400
    assert "is not an http:// or https:// URL" in answer.json()["value"][0]
    good = client.post(
        "/api/v1/properties/",
        {"process": job.pk, "config_group": "alerts", "key": "email", "value": "o@example.com"},
        format="json",
    )
    assert good.status_code == 201
