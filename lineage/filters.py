"""The filters of lineage queries, nodes and relations."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters

from bdre.filters import FilterSet, IdFilter, date_range
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind


class LineageQueryFilter(FilterSet):
    created = date_range("create_ts")
    failed = filters.BooleanFilter(method="filter_failed", help_text="only queries not parsed")
    job = IdFilter(field_name="process__parent", help_text="queries of a job's steps")

    class Meta:
        model = LineageQuery
        fields = ("process", "instance_exec")

    def filter_failed(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.exclude(parse_error="") if value else queryset.filter(parse_error="")


class LineageNodeFilter(FilterSet):
    q = filters.CharFilter(
        field_name="qualified_name", lookup_expr="icontains", help_text="part of the name"
    )
    kind = filters.ChoiceFilter(
        field_name="node_type",
        choices=[(k.name.lower(), k.name.lower()) for k in NodeKind],
        method="filter_kind",
        help_text="table, column, ...",
    )

    class Meta:
        model = LineageNode
        fields = ("container_node",)

    def filter_kind(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(node_type_id=NodeKind[value.upper()]) if value else queryset


class LineageRelationFilter(FilterSet):
    node = IdFilter(method="filter_node", help_text="relations from or to a node")

    class Meta:
        model = LineageRelation
        fields = ("query", "src_node", "target_node")

    def filter_node(self, queryset: QuerySet, name: str, value: int | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.filter(Q(src_node_id=value) | Q(target_node_id=value))
