"""Teams and their members: the services behind the team pages and the API.

A team always keeps at least one admin, so that someone can still manage it."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction

from bdre.models import Membership, Role


@transaction.atomic
def create_team(name: str, creator: User) -> Group:
    """A new team, with its creator as its first admin."""
    if Group.objects.filter(name=name).exists():
        raise ValidationError({"name": f"A team named {name} exists already."})
    team = Group.objects.create(name=name)
    Membership.objects.create(user=creator, team=team, role=Role.ADMIN)
    return team


def _keeps_an_admin(team_id: int, leaving: Membership) -> None:
    others = Membership.objects.filter(team_id=team_id, role=Role.ADMIN).exclude(pk=leaving.pk)
    if leaving.role == Role.ADMIN and not others.exists():
        raise ValidationError({"role": "A team keeps at least one admin."})


@transaction.atomic
def add_member(team: Group, user: User, role: Role) -> Membership:
    if Membership.objects.filter(team=team, user=user).exists():
        raise ValidationError({"user": f"{user} is a member of {team} already."})
    return Membership.objects.create(team=team, user=user, role=role)


@transaction.atomic
def change_role(membership_id: int, role: Role) -> Membership:
    # The row lock on the team's admins keeps two admins from demoting each other at once.
    membership = Membership.objects.select_for_update().get(pk=membership_id)
    list(Membership.objects.select_for_update().filter(team_id=membership.team_id, role=Role.ADMIN))
    if role != Role.ADMIN:
        _keeps_an_admin(membership.team_id, membership)
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def remove_member(membership_id: int) -> None:
    membership = Membership.objects.select_for_update().get(pk=membership_id)
    list(Membership.objects.select_for_update().filter(team_id=membership.team_id, role=Role.ADMIN))
    _keeps_an_admin(membership.team_id, membership)
    membership.delete()
