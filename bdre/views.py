"""Team pages: the user's teams, and a team's members with their roles. Every member reads;
only the team's admins add members, change roles and remove members."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from bdre import teams as services
from bdre.access import Role, role_in, teams
from bdre.ids import is_id
from bdre.models import Membership

ROLE_CHOICES = [(r.value, r.value) for r in Role]


class AddMemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Role.VIEWER.value)

    def clean_username(self):
        name = self.cleaned_data["username"]
        user = get_user_model().objects.filter(username=name, is_active=True).first()
        if user is None:
            raise ValidationError(f"No active user is named {name}.")
        return user


class ChangeRoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    rows = [
        (team, role_in(request.user, team), team.memberships.count())
        for team in teams(request.user).order_by("name")
    ]
    return render(request, "bdre/teams.html", {"rows": rows})


@login_required
def team_detail(request: HttpRequest, pk: int) -> HttpResponse:
    team = get_object_or_404(teams(request.user), pk=pk)
    is_admin = role_in(request.user, team) == Role.ADMIN
    add_form = AddMemberForm()
    if request.method == "POST":
        if not is_admin:
            raise PermissionDenied("Managing members needs the admin role in the team.")
        action = request.POST.get("action")
        try:
            if action == "add":
                add_form = AddMemberForm(request.POST)
                if add_form.is_valid():
                    data = add_form.cleaned_data
                    services.add_member(team, data["username"], Role(data["role"]))
                    messages.success(request, f"{data['username']} joined {team.name}.")
                    return redirect("ui-team", pk=team.pk)
            else:
                raw = request.POST.get("membership", "")
                if not is_id(raw):
                    raise Http404("No such member.")
                membership = get_object_or_404(Membership, pk=int(raw), team=team)
                if action == "role":
                    form = ChangeRoleForm(request.POST)
                    if form.is_valid():
                        services.change_role(membership.pk, Role(form.cleaned_data["role"]))
                        messages.success(
                            request, f"{membership.user} is now {form.cleaned_data['role']}."
                        )
                elif action == "remove":
                    services.remove_member(membership.pk)
                    messages.success(request, f"{membership.user} left {team.name}.")
                return redirect("ui-team", pk=team.pk)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("ui-team", pk=team.pk)
    members = team.memberships.select_related("user").order_by("user__username")
    return render(
        request,
        "bdre/team.html",
        {
            "team": team,
            "members": members,
            "is_admin": is_admin,
            "add_form": add_form,
            "roles": [r.value for r in Role],
        },
    )
