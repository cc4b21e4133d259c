"""REST: lineage queries (register one and get its lineage), nodes with the upstream and
downstream impact of a column, relations, and graphs of a table, a column, a process or a
batch as JSON, SVG or DOT. Everything is scoped to the user's teams: lineage nodes,
relations and queries through ``lineage.visibility``, the one selector of what lineage a user
may see (docs/security.md, "Lineage shows only what the user may see")."""

from __future__ import annotations

from django.db.models import Count
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, renderers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from batches import tables
from batches.models import Batch
from bdre.access import scope
from bdre.api import ScopedViewSet, require_role
from bdre.ids import ID_REGEX
from lineage import graphs, visibility
from lineage.extract import StatementTooDeep, known_schema, register_query
from lineage.filters import LineageNodeFilter, LineageQueryFilter, LineageRelationFilter
from lineage.models import LineageQuery
from lineage.serializers import (
    DIALECTS,
    GraphSerializer,
    ImpactSerializer,
    LineageNodeDetailSerializer,
    LineageNodeSerializer,
    LineageQuerySerializer,
    LineageRelationSerializer,
    RegisterQueryInput,
)
from processes.models import Process

DEPTH = OpenApiParameter(
    "depth", OpenApiTypes.INT, description="how many hops to follow (1-50, default 10)"
)


def _depth(request: Request, default: int = 10) -> int:
    raw = request.query_params.get("depth", "")
    if not raw:
        return default
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= 50:
        raise exceptions.ValidationError({"depth": ["A whole number from 1 to 50."]})
    return int(raw)


class LineageQueryViewSet(ScopedViewSet):
    """Queries whose lineage BDRE recorded: those its ``spark.sql`` steps ran, and those
    registered here (Spark SQL or Hive), parsed against the schemas BDRE knows (registered
    tables and lineage nodes). A query that cannot be read (a table not registered, say) is
    kept with ``parse_error`` and no relations; one nested too deeply for the parser is a
    400 on ``query_string``."""

    http_method_names = ["get", "post", "delete", "head", "options"]
    serializer_class = LineageQuerySerializer
    filterset_class = LineageQueryFilter
    ordering_fields = ("id", "create_ts")

    def base_queryset(self):
        return LineageQuery.objects.annotate(relation_count=Count("relations")).order_by("-id")

    def owner_team(self, data: dict):
        return data["process"].bus_domain.team

    @extend_schema(
        request=RegisterQueryInput,
        responses={
            201: LineageQuerySerializer,
            400: OpenApiResponse(
                description="invalid input, or a statement nested too deeply to be read"
            ),
        },
    )
    def create(self, request: Request) -> Response:
        data = RegisterQueryInput(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        args = data.validated_data
        require_role(request.user, self.owner_team(args), self.write_role)
        # The tables the process's steps may read, as the step itself would resolve them,
        # and what the team's own lineage knows: never another team's columns of a name.
        team = self.owner_team(args)
        known = known_schema(tables.readable_queryset(team.pk), visibility.team_nodes(team.pk))
        try:
            query = register_query(
                args["query_string"],
                kind=DIALECTS[args["dialect"]],
                process=args["process"],
                schema=known.schema,
                partly_known=known.partly,
                target=args.get("target_table") or None,
            )
        except StatementTooDeep as exc:
            raise exceptions.ValidationError({"query_string": [str(exc)]}) from exc
        body = LineageQuerySerializer(self.get_queryset().get(pk=query.pk)).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: LineageRelationSerializer(many=True)})
    # One node's or one query's rows, whole: not in pages, and the list's filters do not
    # apply (they would hide the node itself).
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def relations(self, request: Request, pk: str) -> Response:
        query = self.get_object()
        rows = (
            visibility.relations(request.user)
            .filter(query=query)
            .select_related("src_node", "target_node")
            .order_by("id")
        )
        return Response(LineageRelationSerializer(rows, many=True).data)


class LineageNodeViewSet(viewsets.ReadOnlyModelViewSet):
    """Tables and columns (one node each per team, shared by every query of the team that
    touched them) that a query of one of the user's teams read or wrote: another team's
    table of the same name is another node, never listed. ``upstream`` and ``downstream`` give the
    impact of a node: every node its value comes from or flows into, nearest first."""

    lookup_value_regex = ID_REGEX
    filterset_class = LineageNodeFilter
    ordering_fields = ("id", "qualified_name", "update_ts")

    def get_queryset(self):
        return visibility.nodes(self.request.user).order_by("qualified_name", "id")

    def get_serializer_class(self):
        return LineageNodeDetailSerializer if self.action == "retrieve" else LineageNodeSerializer

    def _impact(self, request: Request, upstream: bool) -> Response:
        node = self.get_object()
        user = request.user
        found = graphs.impact(
            node,
            visibility.relations(user),
            upstream=upstream,
            depth=_depth(request, 50),
            nodes=visibility.nodes(user),
        )
        return Response(ImpactSerializer(found, many=True).data)

    @extend_schema(parameters=[DEPTH], responses={200: ImpactSerializer(many=True)})
    # One node's or one query's rows, whole: not in pages, and the list's filters do not
    # apply (they would hide the node itself).
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def upstream(self, request: Request, pk: str) -> Response:
        return self._impact(request, upstream=True)

    @extend_schema(parameters=[DEPTH], responses={200: ImpactSerializer(many=True)})
    # One node's or one query's rows, whole: not in pages, and the list's filters do not
    # apply (they would hide the node itself).
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def downstream(self, request: Request, pk: str) -> Response:
        return self._impact(request, upstream=False)


class LineageRelationViewSet(viewsets.ReadOnlyModelViewSet):
    """Edges between nodes, each recorded by one query: table to table, and column to
    column with the functions the value went through."""

    lookup_value_regex = ID_REGEX
    serializer_class = LineageRelationSerializer
    filterset_class = LineageRelationFilter
    ordering_fields = ("id",)

    def get_queryset(self):
        rows = visibility.relations(self.request.user).select_related("src_node", "target_node")
        return rows.order_by("id")


# --- graphs ----------------------------------------------------------------------------------


class _DrawingRenderer(renderers.BaseRenderer):
    """A drawing the view made as text (SVG, DOT)."""

    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode() if isinstance(data, str) else data


class SVGRenderer(_DrawingRenderer):
    media_type = "image/svg+xml"
    format = "svg"


class DOTRenderer(_DrawingRenderer):
    media_type = "text/vnd.graphviz"
    format = "dot"


GRAPH_KINDS = ("table", "column", "process", "batch")


class GraphView(APIView):
    """A graph as ``{"nodes": [...], "edges": [...]}`` (JSON), an SVG drawing (layered, left
    to right) or Graphviz DOT: pick with ``?format=json|svg|dot`` or the Accept header.

    - ``table/{node}``: the tables upstream and downstream of a table node;
    - ``column/{node}``: a column's lineage, or every column of a table node with its direct
      sources and targets;
    - ``process/{job}``: a job's workflow of steps, coloured by its last run;
    - ``batch/{batch}``: the batches, runs and files upstream and downstream of a batch."""

    renderer_classes = [renderers.JSONRenderer, SVGRenderer, DOTRenderer]

    @extend_schema(
        parameters=[
            DEPTH,
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=["json", "svg", "dot"], description="drawing"
            ),
        ],
        responses={
            (200, "application/json"): GraphSerializer,
            (200, "image/svg+xml"): OpenApiTypes.STR,
            (200, "text/vnd.graphviz"): OpenApiTypes.STR,
            404: OpenApiResponse(description="unknown, or owned by a team the user is not in"),
        },
    )
    def get(self, request: Request, kind: str, pk: str) -> Response:
        graph = self._graph(request, kind, int(pk))
        fmt = request.accepted_renderer.format
        if fmt == "svg":
            return Response(graphs.to_svg(graph))
        if fmt == "dot":
            return Response(graphs.to_dot(graph))
        return Response(graph.as_dict())

    def handle_exception(self, exc: Exception) -> Response:
        # errors are JSON whatever drawing was asked for
        self.request.accepted_renderer = renderers.JSONRenderer()
        self.request.accepted_media_type = "application/json"
        return super().handle_exception(exc)

    def _graph(self, request: Request, kind: str, pk: int) -> graphs.Graph:
        user = request.user
        if kind in ("table", "column"):
            nodes = visibility.nodes(user)
            node = get_object_or_404(nodes, pk=pk)
            relations = visibility.relations(user)
            if kind == "table":
                if node.container_node_id:
                    node = get_object_or_404(nodes, pk=node.container_node_id)
                return graphs.table_graph(node, relations, depth=_depth(request), nodes=nodes)
            return graphs.column_graph(node, relations, depth=_depth(request), nodes=nodes)
        if kind == "process":
            job = get_object_or_404(
                scope(user, Process.objects.filter(deleted=False)).select_related("parent"), pk=pk
            )
            return graphs.workflow_graph(job.parent or job)
        get_object_or_404(scope(user, Batch.objects.all()), pk=pk)
        return graphs.provenance_graph(pk, visible=scope(user, Batch.objects.all()))
