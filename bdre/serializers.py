from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import serializers

from bdre.access import role_in, teams
from bdre.models import Membership, Role


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


def master_serializer(model) -> type[serializers.ModelSerializer]:
    extra = [f.name for f in model._meta.concrete_fields if f.name not in ("id", "name")]
    meta = type("Meta", (), {"model": model, "fields": ("id", "name", *extra)})
    return type(f"{model.__name__}Serializer", (serializers.ModelSerializer,), {"Meta": meta})
