"""The page of a team's alert destinations (where every job of the team alerts) and the
alerts its jobs sent: read by the team's members, changed by its admins, through the same
services as the API (``alerts.services``)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from alerts import services
from alerts.models import Channel, Destination, Kind
from bdre.access import Role, role_in, teams
from bdre.ids import is_id


class DestinationForm(forms.Form):
    channel = forms.ChoiceField(choices=Channel.choices)
    target = forms.CharField(
        max_length=1024, help_text="an e-mail address, or the URL a webhook posts to"
    )
    kinds = forms.MultipleChoiceField(
        choices=Kind.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="none ticked: every kind",
    )


@login_required
def team_destinations(request: HttpRequest, pk: int) -> HttpResponse:
    team = get_object_or_404(teams(request.user), pk=pk)
    is_admin = role_in(request.user, team) == Role.ADMIN
    form = DestinationForm()
    if request.method == "POST":
        if not is_admin:
            raise PermissionDenied("Alert destinations are the team admins' to change.")
        action = request.POST.get("action")
        try:
            if action == "add":
                form = DestinationForm(request.POST)
                if form.is_valid():
                    data = form.cleaned_data
                    kinds = ",".join(data["kinds"])
                    services.add_destination(team.pk, data["channel"], data["target"], kinds)
                    messages.success(request, f"Every job of {team.name} alerts {data['target']}.")
                    return redirect("ui-team-alerts", pk=team.pk)
            elif action == "remove":
                raw = request.POST.get("destination", "")
                if not is_id(raw):
                    raise ValidationError({"destination": "No such destination of the team."})
                services.remove_destination(team.pk, int(raw))
                messages.success(request, "The destination is removed.")
                return redirect("ui-team-alerts", pk=team.pk)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("ui-team-alerts", pk=team.pk)
    return render(
        request,
        "alerts/team_destinations.html",
        {
            "team": team,
            "is_admin": is_admin,
            "destinations": Destination.objects.filter(team=team).order_by("id"),
            "alerts": services.team_alerts(request.user, team.pk),
            "form": form,
        },
    )
