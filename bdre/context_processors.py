"""What every page needs to know about the user: whether to offer registration at all."""

from __future__ import annotations

from django.http import HttpRequest

from bdre.access import Role, teams


def ui(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"can_register": False}
    return {"can_register": teams(user, Role.DEVELOPER).exists()}
