"""Who may see and do what. One selector, :func:`scope`, decides what a user may see; every
list in the UI, the API and the admin goes through it.

Each team-owned model names the path from its rows to the owning team (a ``Group``) in a
``team_lookup`` class attribute: a string for a single-valued path, or a tuple of paths (any
of which grants access) for rows reached through many-valued relations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar, cast

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import Q, QuerySet

from bdre.models import Membership, Role

M = TypeVar("M", bound=models.Model)
AnyUser = AbstractBaseUser | AnonymousUser

__all__ = ["Role", "can", "role_in", "scope", "signed_in", "team_of", "teams"]


def signed_in(user: User | AnonymousUser) -> User:
    """``request.user`` where authentication guarantees a user (``login_required``, the API's
    ``IsAuthenticated``). A type only: nothing is checked, so that such a view answers as it
    always did (drf-spectacular calls ``get_queryset`` with an anonymous user)."""
    return cast(User, user)


def _is_superuser(user: AnyUser) -> bool:
    return bool(user.is_active and getattr(user, "is_superuser", False))


def _team_ids(user: AbstractBaseUser, min_role: Role) -> QuerySet[Membership, Mapping[str, object]]:
    return Membership.objects.filter(user_id=user.pk, role__in=Role.at_least(min_role)).values(
        "team_id"
    )


def teams(user: AnyUser, min_role: Role = Role.VIEWER) -> QuerySet[Group]:
    """The teams in which ``user`` holds at least ``min_role``."""
    if not user.is_authenticated or not user.is_active:
        return Group.objects.none()
    if _is_superuser(user):
        return Group.objects.all()
    return Group.objects.filter(pk__in=_team_ids(user, min_role))


def scope(user: AnyUser, queryset: QuerySet[M], min_role: Role = Role.VIEWER) -> QuerySet[M]:
    """The rows of ``queryset`` that ``user`` may act on with ``min_role``: rows of teams in
    which he holds that role (everything for a superuser, nothing for anonymous)."""
    if not user.is_authenticated or not user.is_active:
        return queryset.none()
    if _is_superuser(user):
        return queryset
    lookup = getattr(queryset.model, "team_lookup", None)
    if lookup is None:
        raise TypeError(f"{queryset.model.__name__} has no team_lookup: it cannot be scoped")
    team_ids = _team_ids(user, min_role)
    if isinstance(lookup, str):
        return queryset.filter(**{f"{lookup}__in": team_ids})
    # Many-valued paths would repeat rows in a join; a pk subquery keeps each row once.
    condition = Q()
    for path in lookup:
        condition |= Q(**{f"{path}__in": team_ids})
    visible = queryset.model._default_manager.filter(condition).values("pk")
    return queryset.filter(pk__in=visible)


def can(user: AnyUser, obj: models.Model, min_role: Role) -> bool:
    """Whether ``user`` holds ``min_role`` on the team that owns ``obj``."""
    return scope(user, type(obj)._default_manager.filter(pk=obj.pk), min_role).exists()


def team_of(obj: models.Model) -> Group | None:
    """The team that owns ``obj`` (the first path that reaches one, for tuple lookups)."""
    # team_lookup is the team-owned models' own class attribute, which Model does not declare.
    lookup: str | tuple[str, ...] = type(obj).team_lookup  # type: ignore[attr-defined]
    paths = (lookup,) if isinstance(lookup, str) else lookup
    for path in paths:
        team_id = type(obj)._default_manager.filter(pk=obj.pk).values_list(path, flat=True).first()
        if team_id is not None:
            return Group.objects.get(pk=team_id)
    return None


def role_in(user: AnyUser, team: Group) -> Role | None:
    """The role ``user`` holds in ``team`` (admin for a superuser), or None."""
    if not user.is_authenticated or not user.is_active:
        return None
    if _is_superuser(user):
        return Role.ADMIN
    role = Membership.objects.filter(user_id=user.pk, team=team).values_list("role", flat=True)
    found = role.first()
    return Role(found) if found else None


def require_role(user: AnyUser, team: Group | None, role: Role) -> None:
    """PermissionDenied unless ``user`` holds ``role`` (or more) in ``team``: a 403 with this
    message in the API and on the pages. Django's exception, not DRF's, so that services
    may check a role too."""
    held = role_in(user, team) if team is not None else None
    if held is None or held.value not in Role.at_least(role):
        raise PermissionDenied(f"This needs the {role.value} role in the owning team.")
