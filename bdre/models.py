"""Teams and roles. A team is a Django ``Group``; a ``Membership`` gives a user a role in it."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models


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
