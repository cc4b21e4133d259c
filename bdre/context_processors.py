"""What every page needs to know about the user: whether to offer registration at all, and
how many team invitations wait for his answer (shown beside the Teams link)."""

from __future__ import annotations

from django.http import HttpRequest

from bdre.access import Role, teams
from bdre.models import Invitation


def ui(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"can_register": False}
    return {
        "can_register": teams(user, Role.DEVELOPER).exists(),
        "invitations_waiting": Invitation.objects.addressed_to(user).count(),
    }
