"""Team pages: the user's teams with the invitations waiting for him, and a team's members
with their roles and pending invitations. Every member reads; only the team's admins invite
members, cancel invitations, change roles and remove members; only an installation
superuser adds a member directly (bdre.teams)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from bdre import teams as services
from bdre.access import Role, role_in, signed_in, teams
from bdre.ids import is_id
from bdre.models import Invitation, Membership

ROLE_CHOICES = [(r.value, r.value) for r in Role]


class InviteForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Role.VIEWER.value)


class AddMemberForm(forms.Form):
    """A superuser's direct add: he sees every user in the admin anyway, so the name is
    looked up and an unknown one said."""

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


def _posted_id(request: HttpRequest, name: str) -> int:
    raw = request.POST.get(name, "")
    if not is_id(raw):
        raise Http404(f"No such {name}.")
    return int(raw)


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    """The user's teams, and the invitations waiting for his answer."""
    if request.method == "POST":
        user = signed_in(request.user)
        action = request.POST.get("action")
        invitation = _posted_id(request, "invitation")
        try:
            if action == "accept":
                membership = services.accept_invitation(invitation, user)
                messages.success(
                    request, f"You joined {membership.team.name} as {membership.role}."
                )
            elif action == "decline":
                services.decline_invitation(invitation, user)
                messages.success(request, "Invitation declined.")
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        return redirect("ui-teams")
    rows = [
        (team, role_in(request.user, team), team.memberships.count())
        for team in teams(request.user).order_by("name")
    ]
    invitations = Invitation.objects.addressed_to(request.user).select_related("team")
    return render(request, "bdre/teams.html", {"rows": rows, "invitations": invitations})


@login_required
def team_detail(request: HttpRequest, pk: int) -> HttpResponse:
    team = get_object_or_404(teams(request.user), pk=pk)
    user = signed_in(request.user)
    is_admin = role_in(user, team) == Role.ADMIN
    adds_directly = services.adds_directly(user)
    invite_form = InviteForm()
    # Its own ids: a superuser's page holds both forms, with fields of the same names.
    add_form = AddMemberForm(auto_id="direct_%s")
    if request.method == "POST":
        if not is_admin:
            raise PermissionDenied("Managing members needs the admin role in the team.")
        action = request.POST.get("action")
        try:
            if action == "invite":
                invite_form = InviteForm(request.POST)
                if invite_form.is_valid():
                    data = invite_form.cleaned_data
                    sent = services.invite(team, data["username"], Role(data["role"]), by=user)
                    messages.success(request, sent)
                    return redirect("ui-team", pk=team.pk)
            elif action == "add":
                # Before the form looks the name up: its answer would tell which exist.
                if not adds_directly:
                    raise PermissionDenied(services.ADDS_DIRECTLY)
                add_form = AddMemberForm(request.POST, auto_id="direct_%s")
                if add_form.is_valid():
                    data = add_form.cleaned_data
                    services.add_member(team, data["username"], Role(data["role"]), by=user)
                    messages.success(request, f"{data['username']} joined {team.name}.")
                    return redirect("ui-team", pk=team.pk)
            elif action == "cancel":
                invitation = get_object_or_404(
                    Invitation.objects.pending(), pk=_posted_id(request, "invitation"), team=team
                )
                services.cancel_invitation(invitation.pk, by=user)
                messages.success(request, f"The invitation of {invitation.username} is cancelled.")
                return redirect("ui-team", pk=team.pk)
            else:
                membership = get_object_or_404(
                    Membership, pk=_posted_id(request, "membership"), team=team
                )
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
    invitations = team.invitations.pending().select_related("invited_by").order_by("username")
    return render(
        request,
        "bdre/team.html",
        {
            "team": team,
            "members": members,
            "invitations": invitations,
            "is_admin": is_admin,
            "adds_directly": adds_directly,
            "invite_form": invite_form,
            "add_form": add_form,
            "roles": [r.value for r in Role],
        },
    )
