"""Column-level lineage: the queries a step ran, the nodes (tables, columns, functions) they
touch and the relations between them. Nodes are shared across the runs and queries of one
team: each team has its own (two teams' ``sales.orders`` are two nodes), and what a user may
see of them is decided in one place, ``lineage.visibility``."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from bdre.master import MasterTable


class NodeKind(models.IntegerChoices):
    TABLE = 1
    COLUMN = 2
    FUNCTION = 3
    TEMP_TABLE = 4
    IDLE_COLUMN = 5
    CONSTANT = 6


class QueryKind(models.IntegerChoices):
    HIVE = 1
    PIG = 2
    SPARK_SQL = 3
    # The column mappings of the step kinds that run no SQL (lineage.steps)
    SPARK_LOAD = 4
    SPARK_CLEANSE = 5
    SPARK_SHRED = 6
    SPARK_EXPORT = 7


class LineageNodeType(MasterTable):
    pass


class LineageQueryType(MasterTable):
    pass


class LineageQuery(models.Model):
    query_string = models.TextField()
    query_type = models.ForeignKey(LineageQueryType, on_delete=models.PROTECT)
    create_ts = models.DateTimeField(auto_now_add=True)
    process = models.ForeignKey(
        "processes.Process", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    instance_exec = models.ForeignKey(
        "processes.InstanceExec",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="lineage_queries",
    )
    parse_error = models.TextField(blank=True, help_text="Why the query could not be parsed.")

    team_lookup = "process__bus_domain__team"

    class Meta:
        verbose_name_plural = "lineage queries"
        ordering = ["-id"]
        indexes = [models.Index(fields=["process", "-create_ts"], name="lineage_query_process")]

    def __str__(self) -> str:
        return f"query {self.pk}"


class LineageNode(models.Model):
    node_type = models.ForeignKey(LineageNodeType, on_delete=models.PROTECT)
    container_node = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    node_order = models.IntegerField(default=0)
    qualified_name = models.CharField(max_length=512)
    display_name = models.CharField(max_length=255)
    dot_label = models.TextField(blank=True)
    dot_string = models.TextField(blank=True)
    insert_ts = models.DateTimeField(auto_now_add=True)
    update_ts = models.DateTimeField(auto_now=True)
    # The team whose queries touched the node (a column has its table's): a name means what
    # it means to one team, as its tables do (``batches.tables``), so another team's query of
    # the same name never lands on this node, nor adds its columns to this table. None: a
    # query of no process recorded it (seen by superusers only).
    team = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="lineage_nodes"
    )

    # docs/security.md, "Lineage shows only what the user may see": lineage.visibility.
    team_lookup = "team"

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["container_node", "qualified_name"], name="lineage_node_unique_in_container"
            ),
            # NULLs are distinct in a unique index: top-level nodes (tables) need their own,
            # one per team, and one for the nodes of no team.
            models.UniqueConstraint(
                fields=["team", "qualified_name"],
                condition=Q(container_node__isnull=True),
                name="lineage_node_unique_top_level_per_team",
            ),
            models.UniqueConstraint(
                fields=["qualified_name"],
                condition=Q(container_node__isnull=True, team__isnull=True),
                name="lineage_node_unique_top_level_no_team",
            ),
        ]

    def __str__(self) -> str:
        return self.qualified_name


class LineageRelation(models.Model):
    src_node = models.ForeignKey(LineageNode, on_delete=models.CASCADE, related_name="outgoing")
    target_node = models.ForeignKey(LineageNode, on_delete=models.CASCADE, related_name="incoming")
    query = models.ForeignKey(LineageQuery, on_delete=models.CASCADE, related_name="relations")
    dot_string = models.TextField(blank=True)
    # An indirect dependency: the source column decides which rows (a filter, a join's
    # condition) or how they are grouped, not the value; comma separated kinds, "" if direct.
    indirect = models.CharField(max_length=64, blank=True)

    team_lookup = "query__process__bus_domain__team"

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["src_node", "target_node", "query"], name="lineage_relation_unique"
            ),
        ]
        indexes = [models.Index(fields=["target_node"], name="lineage_relation_target")]

    def __str__(self) -> str:
        return f"{self.src_node_id} -> {self.target_node_id}"
