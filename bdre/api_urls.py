from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from batches.api import (
    ArchiveViewSet,
    BatchViewSet,
    FileViewSet,
    QueueViewSet,
    TableShareViewSet,
    TableViewSet,
)
from bdre.ids import ID_REGEX
from bdre.team_api import MASTER_TABLES, MembershipViewSet, TeamViewSet, master_viewset
from bdre.token_api import ApiTokenViewSet, IssueToken
from lineage.api import (
    GRAPH_KINDS,
    GraphView,
    LineageNodeViewSet,
    LineageQueryViewSet,
    LineageRelationViewSet,
)
from processes.api import (
    ApplicationViewSet,
    LogViewSet,
    ProcessViewSet,
    PropertyViewSet,
    RunViewSet,
    ServerViewSet,
    TemplateViewSet,
)

router = DefaultRouter()
router.register("applications", ApplicationViewSet, basename="application")
router.register("processes", ProcessViewSet, basename="process")
router.register("templates", TemplateViewSet, basename="template")
router.register("properties", PropertyViewSet, basename="property")
router.register("runs", RunViewSet, basename="run")
router.register("logs", LogViewSet, basename="log")
router.register("batches", BatchViewSet, basename="batch")
router.register("queue", QueueViewSet, basename="queue")
router.register("archive", ArchiveViewSet, basename="archive")
router.register("files", FileViewSet, basename="file")
router.register("tables", TableViewSet, basename="table")
router.register("table-shares", TableShareViewSet, basename="table-share")
router.register("servers", ServerViewSet, basename="server")
router.register("lineage/queries", LineageQueryViewSet, basename="lineage-query")
router.register("lineage/nodes", LineageNodeViewSet, basename="lineage-node")
router.register("lineage/relations", LineageRelationViewSet, basename="lineage-relation")
router.register("teams", TeamViewSet, basename="team")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("tokens", ApiTokenViewSet, basename="token")
for prefix, model in MASTER_TABLES.items():
    router.register(f"master/{prefix}", master_viewset(model), basename=prefix)

urlpatterns = [
    path("auth/token/", IssueToken.as_view(), name="api-token"),
    re_path(
        rf"^lineage/graph/(?P<kind>{'|'.join(GRAPH_KINDS)})/(?P<pk>{ID_REGEX})/$",
        GraphView.as_view(),
        name="lineage-graph",
    ),
    *router.urls,
]
