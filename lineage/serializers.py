"""The lineage API's bodies: queries, nodes, relations, impact rows and graphs."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from bdre.api import ScopedRelatedField
from lineage import visibility
from lineage.extract import edge_functions
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind, QueryKind
from processes.models import Process

TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
DIALECTS = {"spark_sql": QueryKind.SPARK_SQL, "hive": QueryKind.HIVE}


def node_kind(node: LineageNode) -> str:
    return NodeKind(node.node_type_id).name.lower()


class LineageQuerySerializer(serializers.ModelSerializer):
    dialect = serializers.SerializerMethodField()
    relation_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = LineageQuery
        fields = (
            "id",
            "query_string",
            "dialect",
            "process",
            "instance_exec",
            "create_ts",
            "parse_error",
            "relation_count",
        )

    def get_dialect(self, query: LineageQuery) -> str:
        return QueryKind(query.query_type_id).name.lower()


class RegisterQueryInput(serializers.Serializer):
    query_string = serializers.CharField(max_length=200_000, trim_whitespace=False)
    dialect = serializers.ChoiceField(choices=sorted(DIALECTS), default="spark_sql")
    process = ScopedRelatedField(
        queryset=Process.objects.filter(deleted=False),
        help_text="The process the query belongs to: its team owns the query.",
    )
    target_table = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=257,
        help_text="db.table a plain SELECT writes to (INSERT and CREATE ... AS name theirs).",
    )

    def validate_query_string(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("The query is empty.")
        if "\x00" in value:
            raise serializers.ValidationError("The query holds a NUL character.")
        return value

    def validate_target_table(self, value: str) -> str:
        if value and not TABLE_NAME.match(value):
            raise serializers.ValidationError("Give the table as db.table (letters, digits, _).")
        return value


class LineageNodeSerializer(serializers.ModelSerializer):
    kind = serializers.SerializerMethodField()
    container: serializers.PrimaryKeyRelatedField[LineageNode]
    container = serializers.PrimaryKeyRelatedField(
        source="container_node", read_only=True, allow_null=True, help_text="null for a table"
    )

    class Meta:
        model = LineageNode
        fields: tuple[str, ...] = (
            "id",
            "kind",
            "qualified_name",
            "display_name",
            "container",
            "node_order",
            "insert_ts",
            "update_ts",
        )

    def get_kind(self, node: LineageNode) -> str:
        return node_kind(node)


class LineageNodeDetailSerializer(LineageNodeSerializer):
    columns = serializers.SerializerMethodField()

    class Meta(LineageNodeSerializer.Meta):
        fields = (*LineageNodeSerializer.Meta.fields, "columns")

    def get_columns(self, node: LineageNode) -> list[dict[str, Any]]:
        # the columns the user may see (a node's are its team's: lineage.visibility)
        children = visibility.columns(self.context["request"].user, node)
        # many=True makes a ListSerializer, whose data is a list; the stubs type the
        # serializer's own (a dict).
        return LineageNodeSerializer(children, many=True).data  # type: ignore[return-value]


class LineageRelationSerializer(serializers.ModelSerializer):
    # DRF's metaclass takes the declared fields out of the class, so a field may be named like
    # an attribute of Field (source, label); the stubs see that attribute redefined.
    source = serializers.CharField(  # type: ignore[assignment]
        source="src_node.qualified_name", read_only=True
    )
    target = serializers.CharField(source="target_node.qualified_name", read_only=True)
    functions = serializers.SerializerMethodField()
    indirect = serializers.SerializerMethodField(
        help_text="How the source decides the target's rows (filter, join, group by), not its "
        "value; empty for a direct dependency."
    )

    class Meta:
        model = LineageRelation
        fields = (
            "id",
            "src_node",
            "source",
            "target_node",
            "target",
            "query",
            "functions",
            "indirect",
        )

    def get_functions(self, relation: LineageRelation) -> list[str]:
        return edge_functions(relation.dot_string)

    def get_indirect(self, relation: LineageRelation) -> list[str]:
        return [kind for kind in relation.indirect.split(",") if kind]


class ImpactSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    qualified_name = serializers.CharField()
    kind = serializers.CharField()
    distance = serializers.IntegerField(help_text="hops from the node asked about")
    functions = serializers.ListField(child=serializers.CharField())


class GraphNodeSerializer(serializers.Serializer):
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # as source above
    kind = serializers.CharField()
    detail = serializers.CharField()
    state = serializers.CharField()
    ref = serializers.IntegerField(allow_null=True)
    focus = serializers.BooleanField()
    url = serializers.CharField()


class GraphEdgeSerializer(serializers.Serializer):
    source = serializers.CharField()  # type: ignore[assignment]  # as in LineageRelationSerializer
    target = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # as in LineageRelationSerializer


class GraphSerializer(serializers.Serializer):
    kind = serializers.CharField()
    title = serializers.CharField()
    truncated = serializers.BooleanField()
    nodes = GraphNodeSerializer(many=True)
    edges = GraphEdgeSerializer(many=True)
