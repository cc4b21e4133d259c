"""The project's own REST resources: teams, memberships, API tokens (bdre.routes)."""

from __future__ import annotations

from django.urls import path

from bdre.routes import extra_urls, router
from bdre.team_api import InvitationViewSet, MembershipViewSet, TeamViewSet
from bdre.token_api import ApiTokenViewSet, IssueToken

router.register("teams", TeamViewSet, basename="team")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("invitations", InvitationViewSet, basename="invitation")
router.register("tokens", ApiTokenViewSet, basename="token")
extra_urls.append(path("auth/token/", IssueToken.as_view(), name="api-token"))
