"""The pages of alerts (included by bdre.ui_urls)."""

from django.urls import re_path

from alerts import views
from bdre.ids import ID_REGEX

ID = f"(?P<pk>{ID_REGEX})"

urlpatterns = [
    re_path(rf"^teams/{ID}/alerts/$", views.team_destinations, name="ui-team-alerts"),
]
