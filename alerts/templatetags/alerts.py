"""``{% job_alerts job %}``: the job's latest alerts on its page, for a user who may see them
(the page belongs to processes, which knows nothing of alerts)."""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.auth.models import Group

from alerts import services
from alerts.models import Destination
from processes.models import Process

register = template.Library()


@register.inclusion_tag("alerts/_job_alerts.html", takes_context=True)
def job_alerts(context: dict[str, Any], job: Process) -> dict[str, Any]:
    return {"alerts": services.visible_alerts(context["request"].user, job)}


@register.inclusion_tag("alerts/_team_alerts.html")
def team_alerts_link(team: Group) -> dict[str, Any]:
    """The team page's link to its alert destinations (the page belongs to bdre)."""
    return {"team": team, "destinations": Destination.objects.filter(team=team).count()}
