"""Lineage as REST resources, and its graph drawings (bdre.routes)."""

from __future__ import annotations

from django.urls import re_path

from bdre.ids import ID_REGEX
from bdre.routes import extra_urls, register_master, router
from lineage.api import (
    GRAPH_KINDS,
    GraphView,
    LineageNodeViewSet,
    LineageQueryViewSet,
    LineageRelationViewSet,
)
from lineage.models import LineageNodeType, LineageQueryType

router.register("lineage/queries", LineageQueryViewSet, basename="lineage-query")
router.register("lineage/nodes", LineageNodeViewSet, basename="lineage-node")
router.register("lineage/relations", LineageRelationViewSet, basename="lineage-relation")
register_master("lineage-node-types", LineageNodeType)
register_master("lineage-query-types", LineageQueryType)
extra_urls.append(
    re_path(
        rf"^lineage/graph/(?P<kind>{'|'.join(GRAPH_KINDS)})/(?P<pk>{ID_REGEX})/$",
        GraphView.as_view(),
        name="lineage-graph",
    )
)
