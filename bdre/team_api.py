"""REST: teams and memberships."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db.models import Count
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from bdre import teams as team_service
from bdre.access import Role, signed_in, teams
from bdre.api import ScopedViewSet, require_role
from bdre.ids import ID_REGEX
from bdre.models import Membership
from bdre.serializers import MembershipSerializer, TeamSerializer


def names_teams(user) -> bool:
    return bool(user.is_staff or user.is_superuser)


class TeamViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """The teams the user belongs to (all of them for a superuser). Staff create teams and
    become their first admin; staff admins of a team rename it; superusers delete an empty
    one.

    Team names are unique in the installation (Django's ``Group``), unlike every other name
    (docs/security.md, "Names are per team"): "a team of that name exists" would tell anyone
    who may name a team the names of teams he is not in. So only staff, who set up the
    installation's teams, name them, and a user who may not is refused before his name is
    looked at."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = TeamSerializer
    filterset_fields = ("name",)
    ordering_fields = ("id", "name")
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def get_queryset(self):
        return teams(self.request.user).annotate(member_count=Count("memberships")).order_by("name")

    def create(self, request: Request, *args, **kwargs) -> Response:
        if not names_teams(request.user):
            self.permission_denied(request, "Only staff create teams.")
        return super().create(request, *args, **kwargs)

    def update(self, request: Request, *args, **kwargs) -> Response:
        require_role(request.user, self.get_object(), Role.ADMIN)
        if not names_teams(request.user):
            self.permission_denied(
                request, "Team names are unique in the installation: staff rename teams."
            )
        return super().update(request, *args, **kwargs)

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        team = team_service.create_team(
            serializer.validated_data["name"], signed_in(self.request.user)
        )
        # member_count is the list's annotate(), which Group does not declare: set by hand here.
        team.member_count = 1  # type: ignore[attr-defined]
        serializer.instance = team

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        require_role(self.request.user, serializer.instance, Role.ADMIN)
        serializer.save()

    def perform_destroy(self, instance: Group) -> None:
        if not self.request.user.is_superuser:
            self.permission_denied(self.request, "Only superusers delete teams.")
        instance.delete()


@extend_schema_view(
    destroy=extend_schema(
        responses={204: None, 400: OpenApiResponse(description="A team keeps at least one admin.")}
    )
)
class MembershipViewSet(ScopedViewSet):
    """Who holds which role in the user's teams. Members see them; admins change them, and
    a team keeps at least one admin."""

    serializer_class = MembershipSerializer
    filterset_fields = ("team", "role", "user__username")
    ordering_fields = ("id", "added_ts")
    write_role = Role.ADMIN

    def base_queryset(self):
        return Membership.objects.select_related("user", "team").order_by("team__name", "id")

    def owner_team(self, data: dict):
        return data.get("team")

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        data = serializer.validated_data
        require_role(self.request.user, data["team"], Role.ADMIN)
        serializer.instance = team_service.add_member(data["team"], data["user"], data["role"])

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        membership = serializer.instance
        assert membership is not None  # an update's serializer holds its row
        require_role(self.request.user, membership.team, Role.ADMIN)
        role = serializer.validated_data.get("role", membership.role)
        serializer.instance = team_service.change_role(membership.pk, Role(role))

    def perform_destroy(self, instance: Membership) -> None:
        team_service.remove_member(instance.pk)
