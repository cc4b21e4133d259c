"""REST: teams and memberships."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db.models import Count, Q
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from bdre import teams as team_service
from bdre.access import Role, scope, signed_in, teams
from bdre.api import ScopedViewSet, require_role
from bdre.ids import ID_REGEX
from bdre.models import Invitation, Membership
from bdre.serializers import (
    InvitationSentSerializer,
    InvitationSerializer,
    InviteSerializer,
    MembershipSerializer,
    TeamSerializer,
)


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
    a team keeps at least one admin. Only an installation superuser adds a member directly:
    a team admin invites (``/invitations/``), and the user accepts."""

    serializer_class = MembershipSerializer
    filterset_fields = ("team", "role", "user__username")
    ordering_fields = ("id", "added_ts")
    write_role = Role.ADMIN

    def base_queryset(self):
        return Membership.objects.select_related("user", "team").order_by("team__name", "id")

    def owner_team(self, data: dict):
        return data.get("team")

    def create(self, request: Request, *args, **kwargs) -> Response:
        # Refused before the body is read: "no such user" would tell a team admin which
        # user names exist. A team admin invites (InvitationViewSet).
        if not team_service.adds_directly(request.user):
            self.permission_denied(request, team_service.ADDS_DIRECTLY)
        return super().create(request, *args, **kwargs)

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        data = serializer.validated_data
        serializer.instance = team_service.add_member(
            data["team"], data["user"], data["role"], by=signed_in(self.request.user)
        )

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        membership = serializer.instance
        assert membership is not None  # an update's serializer holds its row
        require_role(self.request.user, membership.team, Role.ADMIN)
        role = serializer.validated_data.get("role", membership.role)
        serializer.instance = team_service.change_role(membership.pk, Role(role))

    def perform_destroy(self, instance: Membership) -> None:
        team_service.remove_member(instance.pk)


@extend_schema_view(
    create=extend_schema(
        summary="Invite a user into one of your teams",
        request=InviteSerializer,
        responses={202: InvitationSentSerializer},
        description="Invite a user, by name, into one of your teams (admin role). The "
        "answer is the same whether a user of that name exists or not; the user sees the "
        "invitation in GET /invitations/ and on the Teams page, and accepts or declines.",
    ),
    destroy=extend_schema(
        summary="Cancel a pending invitation",
        description="Cancel a pending invitation of your team (admin role).",
    ),
)
class InvitationViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Pending invitations: those addressed to the user (to accept or decline) and those of
    his teams (their admins cancel them)."""

    lookup_value_regex = ID_REGEX
    serializer_class = InvitationSerializer
    filterset_fields = ("team", "role")
    ordering_fields = ("id", "created_ts", "expires_at")

    def get_queryset(self):
        user = self.request.user
        of_teams = scope(user, Invitation.objects.all()).values("pk")
        mine = Invitation.objects.addressed_to(user).values("pk")
        return (
            Invitation.objects.pending()
            .filter(Q(pk__in=of_teams) | Q(pk__in=mine))
            .select_related("team", "invited_by")
        )

    def create(self, request: Request, *args, **kwargs) -> Response:
        body = InviteSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        sent = team_service.invite(
            data["team"], data["username"], Role(data["role"]), by=signed_in(request.user)
        )
        return Response({"detail": sent}, status=status.HTTP_202_ACCEPTED)

    def perform_destroy(self, instance: Invitation) -> None:
        team_service.cancel_invitation(instance.pk, by=signed_in(self.request.user))

    @extend_schema(
        request=None,
        responses={
            201: MembershipSerializer,
            400: OpenApiResponse(description="You are a member of the team already."),
        },
    )
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, pk: str) -> Response:
        """Accept an invitation addressed to you: you become a member with its role."""
        membership = team_service.accept_invitation(int(pk), signed_in(request.user))
        data = MembershipSerializer(membership, context={"request": request}).data
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["post"])
    def decline(self, request: Request, pk: str) -> Response:
        """Decline an invitation addressed to you."""
        team_service.decline_invitation(int(pk), signed_in(request.user))
        return Response(status=status.HTTP_204_NO_CONTENT)
