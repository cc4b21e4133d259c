from __future__ import annotations

from django.contrib import admin

from bdre.admin import MasterTableAdmin, ScopedAdmin
from lineage.models import (
    LineageNode,
    LineageNodeType,
    LineageQuery,
    LineageQueryType,
    LineageRelation,
)

admin.site.register(LineageNodeType, MasterTableAdmin)
admin.site.register(LineageQueryType, MasterTableAdmin)


@admin.register(LineageQuery)
class LineageQueryAdmin(ScopedAdmin):
    list_display = ("id", "query_type", "process", "instance_exec", "create_ts", "parsed")
    list_filter = ("query_type",)
    search_fields = ("query_string", "process__name")
    raw_id_fields = ("process", "instance_exec")

    @admin.display(boolean=True)
    def parsed(self, obj: LineageQuery) -> bool:
        return not obj.parse_error


@admin.register(LineageNode)
class LineageNodeAdmin(ScopedAdmin):
    list_display = ("id", "qualified_name", "team", "node_type", "container_node", "node_order")
    list_filter = ("node_type", "team")
    search_fields = ("qualified_name", "display_name")
    raw_id_fields = ("container_node",)


@admin.register(LineageRelation)
class LineageRelationAdmin(ScopedAdmin):
    list_display = ("id", "src_node", "target_node", "query")
    raw_id_fields = ("src_node", "target_node", "query")
