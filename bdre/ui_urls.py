"""The browser UI's pages: the project's own (teams, API tokens) and each app's ``urls``
module, included by name so that the project imports no app."""

from django.urls import include, path, re_path

from bdre import token_views
from bdre import views as team_views
from bdre.ids import ID_REGEX

ID = f"(?P<pk>{ID_REGEX})"

urlpatterns = [
    path("", include("processes.urls")),
    path("", include("batches.urls")),
    path("", include("lineage.urls")),
    path("", include("alerts.urls")),
    path("teams/", team_views.team_list, name="ui-teams"),
    re_path(rf"^teams/{ID}/$", team_views.team_detail, name="ui-team"),
    path("tokens/", token_views.token_list, name="ui-tokens"),
    re_path(rf"^tokens/{ID}/revoke/$", token_views.token_revoke, name="ui-token-revoke"),
]
