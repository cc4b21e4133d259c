"""The lineage pages (included by bdre.ui_urls)."""

from django.urls import path, re_path

from bdre.ids import ID_REGEX
from lineage import views

urlpatterns = [
    path("lineage/", views.search, name="ui-lineage"),
    re_path(rf"^lineage/nodes/(?P<pk>{ID_REGEX})/$", views.node, name="ui-lineage-node"),
]
