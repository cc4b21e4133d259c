from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import serializers

from bdre.access import role_in, teams
from bdre.models import Invitation, Membership, Role


class TeamSerializer(serializers.ModelSerializer):
    my_role = serializers.SerializerMethodField(help_text="The requesting user's role.")
    members = serializers.IntegerField(source="member_count", read_only=True)

    class Meta:
        model = Group
        fields = ("id", "name", "my_role", "members")

    def get_my_role(self, team: Group) -> str | None:
        request = self.context.get("request")
        role = role_in(request.user, team) if request else None
        return role.value if role else None


class MembershipSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.filter(is_active=True)
    )
    team = serializers.PrimaryKeyRelatedField(queryset=Group.objects.all())
    role = serializers.ChoiceField(choices=Role.choices)

    class Meta:
        model = Membership
        fields = ("id", "user", "team", "role", "added_ts")
        read_only_fields = ("added_ts",)

    def validate_team(self, team: Group) -> Group:
        request = self.context.get("request")
        if request is not None and not teams(request.user).filter(pk=team.pk).exists():
            raise serializers.ValidationError(f'Invalid pk "{team.pk}" - object does not exist.')
        return team

    def validate(self, attrs: dict) -> dict:
        if self.instance is not None:
            for name in ("user", "team"):
                if name in attrs and attrs[name] != getattr(self.instance, name):
                    raise serializers.ValidationError(
                        {name: "A membership cannot move: remove it and add another."}
                    )
        return attrs


class InvitationSerializer(serializers.ModelSerializer):
    """A pending invitation, as its team's members and the user it names see it."""

    team_name = serializers.CharField(source="team.name", read_only=True)
    invited_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )

    class Meta:
        model = Invitation
        fields = (
            "id",
            "team",
            "team_name",
            "username",
            "role",
            "invited_by",
            "created_ts",
            "expires_at",
        )
        read_only_fields = fields


class InviteSerializer(serializers.Serializer):
    """An invitation to send: the user by name (never looked up), into one of the user's
    teams, with a role."""

    team = serializers.PrimaryKeyRelatedField(queryset=Group.objects.all())
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER.value)

    validate_team = MembershipSerializer.validate_team


class InvitationSentSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="The same whether a user of that name exists or not.")


def master_serializer(model) -> type[serializers.ModelSerializer]:
    extra = [f.name for f in model._meta.concrete_fields if f.name not in ("id", "name")]
    meta = type("Meta", (), {"model": model, "fields": ("id", "name", *extra)})
    return type(f"{model.__name__}Serializer", (serializers.ModelSerializer,), {"Meta": meta})
