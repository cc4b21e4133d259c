"""Teams and roles. A team is a Django ``Group``; a ``Membership`` gives a user a role in it."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"  # BDRE's "user": reads
    DEVELOPER = "developer", "Developer"  # registers, edits, runs, terminates, requeues
    ADMIN = "admin", "Admin"  # manages members and servers, deletes

    @classmethod
    def at_least(cls, role: Role) -> list[str]:
        """The roles that include ``role``'s rights."""
        return [r.value for r in cls if _RANK[r] >= _RANK[role]]


_RANK = {Role.VIEWER: 1, Role.DEVELOPER: 2, Role.ADMIN: 3}


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    added_ts = models.DateTimeField(auto_now_add=True)

    team_lookup = "team"

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team"),
            models.CheckConstraint(
                condition=models.Q(role__in=[r.value for r in Role]),
                name="membership_role_valid",
            ),
        ]
        indexes = [models.Index(fields=["user", "role"], name="membership_user_role")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.team}"


class InvitationQuerySet(models.QuerySet["Invitation"]):
    def pending(self) -> InvitationQuerySet:
        return self.filter(expires_at__gt=timezone.now())

    def addressed_to(self, user) -> InvitationQuerySet:
        """The pending invitations that ``user`` may accept or decline."""
        return self.pending().filter(username=user.get_username())


class Invitation(models.Model):
    """A team admin's offer of a role to a user, who becomes a member only by accepting it.

    It names the user by the user name the admin typed, not by a key to a user: an
    invitation to a name that no user has is stored like any other, so that neither the
    answer, nor its time, nor the team's list of pending invitations tells the admin which
    names exist (docs/security.md, "Memberships by consent")."""

    team = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="invitations")
    username = models.CharField(max_length=150)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_ts = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    objects = InvitationQuerySet.as_manager()
    team_lookup = "team"

    class Meta:
        ordering = ["-created_ts", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "username"], name="invitation_unique_team_username"
            ),
            models.CheckConstraint(
                condition=models.Q(role__in=[r.value for r in Role]),
                name="invitation_role_valid",
            ),
        ]
        indexes = [models.Index(fields=["username"], name="invitation_username")]

    def __str__(self) -> str:
        return f"{self.username} invited as {self.role} of {self.team}"


def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def find(self, key: str) -> ApiToken | None:
        return self.select_related("user").filter(key_digest=_key_digest(key)).first()


class ApiToken(models.Model):
    """A key for the REST API. Only a digest of the key is stored, so a copy of the database
    (a backup, a read replica) holds no usable key; the owner sees the key once, when it is
    created."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    key_digest = models.CharField(max_length=64, unique=True)
    created_ts = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()
    # Not a field, never stored: the plain key of a token just issued, set for the one answer
    # that shows it (the API's create).
    key: str

    class Meta:
        ordering = ["-created_ts", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"token {self.name or self.pk} of {self.user}"

    @property
    def expired(self) -> bool:
        return self.expires_at <= timezone.now()

    @classmethod
    def issue(cls, user, name: str = "", days: int | None = None) -> tuple[ApiToken, str]:
        """A new token and its key, the only time the key is known."""
        key = secrets.token_hex(20)  # 40 hex characters, the form DRF's keys had
        days = settings.BDRE_TOKEN_DAYS if days is None else days
        token = cls.objects.create(
            user=user,
            name=name,
            key_digest=_key_digest(key),
            expires_at=timezone.now() + timedelta(days=days),
        )
        return token, key
