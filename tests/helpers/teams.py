"""The team of the team fixture (tests/conftest.py), for a module-scoped world too."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Group

from bdre.models import Role
from processes.models import BusDomain
from tests.helpers.factories import (
    BusDomainFactory,
    MembershipFactory,
    TeamFactory,
    UserFactory,
)


@dataclass
class Team:
    """One team with a member of each role, an application of its own, and an outsider: a
    developer of another team, with another application."""

    group: Group
    application: BusDomain
    viewer: object
    developer: object
    admin: object
    outsider: object
    other_group: Group
    other_application: BusDomain


def build_team() -> Team:
    group = TeamFactory(name="analytics")
    other = TeamFactory(name="marketing")
    members = {
        role: MembershipFactory(user=UserFactory(username=role.value), team=group, role=role).user
        for role in Role
    }
    outsider = MembershipFactory(
        user=UserFactory(username="outsider"), team=other, role=Role.DEVELOPER
    ).user
    return Team(
        group=group,
        application=BusDomainFactory(name="web", team=group),
        viewer=members[Role.VIEWER],
        developer=members[Role.DEVELOPER],
        admin=members[Role.ADMIN],
        outsider=outsider,
        other_group=other,
        other_application=BusDomainFactory(name="ads", team=other),
    )
