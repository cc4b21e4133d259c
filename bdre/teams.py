"""Teams and their members: the services behind the team pages and the API.

A team always keeps at least one admin, so that someone can still manage it. Nobody becomes a
member of a team without saying so: a team admin invites a user by name, and the user accepts
or declines; only an installation superuser adds a member directly (docs/security.md,
"Memberships by consent")."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from bdre.access import role_in
from bdre.models import Invitation, Membership, Role

NO_INVITATION = "No such invitation (it was answered, cancelled, or it expired)."


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


def _require_admin(user: User, team: Group, doing: str) -> None:
    if role_in(user, team) != Role.ADMIN:
        raise PermissionDenied(f"{doing} needs the admin role in the team.")


ADDS_DIRECTLY = (
    "Only an installation superuser adds a member directly: a team admin invites the user "
    "(POST /api/v1/invitations/, or the team's page), who accepts or declines."
)


def adds_directly(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether ``user`` may make someone a member without asking him: an installation
    superuser. Interfaces ask it before they read the request, so that nobody else learns
    from their answer whether a user name exists."""
    return bool(user.is_active and getattr(user, "is_superuser", False))


@transaction.atomic
def add_member(team: Group, user: User, role: Role, *, by: User) -> Membership:
    """``user`` becomes a member at once, without being asked (:func:`adds_directly`)."""
    if not adds_directly(by):
        raise PermissionDenied(ADDS_DIRECTLY)
    if Membership.objects.filter(team=team, user=user).exists():
        raise ValidationError({"user": f"{user} is a member of {team} already."})
    return Membership.objects.create(team=team, user=user, role=role)


# The one answer to an invitation, whether a user of that name exists or not, byte for byte
# (it does not repeat the name: the team's pending invitations show it).
INVITATION_SENT = (
    "Invitation sent, if a user of that name exists: the user joins the team when he accepts it."
)


@transaction.atomic
def invite(team: Group, username: str, role: Role, *, by: User) -> str:
    """Invite the user named ``username`` into ``team`` with ``role``; answers
    :data:`INVITATION_SENT`.

    No user is looked up: the invitation is stored by name, the same one write whether the
    name is a user's, nobody's, or a member's already, so that neither the answer, its time,
    nor the team's pending invitations tell which names exist. Inviting a name again renews
    the invitation with the new role."""
    _require_admin(by, team, "Inviting a member")
    name = User.normalize_username(username).strip()
    if not name:
        raise ValidationError({"username": "A user name is needed."})
    Invitation.objects.update_or_create(
        team=team,
        username=name,
        defaults={
            "role": role,
            "invited_by": by,
            "expires_at": timezone.now() + timedelta(days=settings.BDRE_INVITATION_DAYS),
        },
    )
    return INVITATION_SENT


def _addressed(invitation_id: int, user: AbstractBaseUser) -> Invitation:
    # Someone else's invitation is answered as no invitation at all: it tells nothing.
    found = Invitation.objects.addressed_to(user).filter(pk=invitation_id).first()
    if found is None:
        raise Http404(NO_INVITATION)
    return found


@transaction.atomic
def accept_invitation(invitation_id: int, user: User) -> Membership:
    """``user`` accepts an invitation addressed to him and becomes a member with its role."""
    invitation = _addressed(invitation_id, user)
    if Membership.objects.filter(team_id=invitation.team_id, user=user).exists():
        raise ValidationError(
            {"invitation": f"You are a member of {invitation.team} already: decline it."}
        )
    # Only the invitation as it was read: one renewed with another role meanwhile, cancelled,
    # answered by a parallel request or expired since is not taken.
    taken, _ = (
        Invitation.objects.addressed_to(user)
        .filter(pk=invitation.pk, role=invitation.role, team_id=invitation.team_id)
        .delete()
    )
    if not taken:
        raise Http404(NO_INVITATION)
    return Membership.objects.create(team_id=invitation.team_id, user=user, role=invitation.role)


@transaction.atomic
def decline_invitation(invitation_id: int, user: User) -> None:
    """``user`` declines an invitation addressed to him: it is gone."""
    taken, _ = Invitation.objects.addressed_to(user).filter(pk=invitation_id).delete()
    if not taken:
        raise Http404(NO_INVITATION)


@transaction.atomic
def cancel_invitation(invitation_id: int, *, by: User) -> None:
    """A team admin takes back an invitation of his team that is still pending."""
    invitation = Invitation.objects.pending().select_related("team").filter(pk=invitation_id)
    found = invitation.first()
    if found is None:
        raise Http404(NO_INVITATION)
    _require_admin(by, found.team, "Cancelling an invitation")
    invitation.delete()


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
