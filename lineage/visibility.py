"""What of the lineage a user may see: the one selector every lineage list, detail, search,
graph and page goes through (docs/security.md, "Lineage shows only what the user may see").

A node belongs to the team whose queries touched it (``LineageNode.team``; a column has its
table's): two teams' ``sales.orders`` are two nodes, each with the columns its own team's
queries read or wrote. A user sees
- the nodes of his teams (``bdre.access.scope``; every node for a superuser);
- the relations recorded by his teams' queries whose two ends he sees;
- his teams' queries.

Another team's node is dropped, never drawn, not even as an opaque box: no relation a user
sees leads to it, and a graph or an impact list is built only from the relations and nodes
given here, so it never reaches one (nor shows that one exists)."""

from __future__ import annotations

from django.db.models import QuerySet

from bdre.access import AnyUser, scope
from lineage.models import LineageNode, LineageQuery, LineageRelation


def nodes(user: AnyUser) -> QuerySet[LineageNode]:
    """The tables and columns ``user`` may see."""
    return scope(user, LineageNode.objects.all())


def relations(user: AnyUser) -> QuerySet[LineageRelation]:
    """The edges ``user`` may see: his teams' queries', between two nodes he may see."""
    shown = nodes(user)
    return scope(user, LineageRelation.objects.all()).filter(
        src_node__in=shown, target_node__in=shown
    )


def queries(user: AnyUser) -> QuerySet[LineageQuery]:
    return scope(user, LineageQuery.objects.all())


def columns(user: AnyUser, table: LineageNode) -> QuerySet[LineageNode]:
    """The columns of ``table`` that ``user`` may see, in order."""
    return nodes(user).filter(container_node=table).order_by("node_order", "id")


def team_nodes(team_id: int) -> QuerySet[LineageNode]:
    """The nodes of one team: what a query registered for its process may be read against
    (``lineage.extract.known_schema``), whoever registers it."""
    return LineageNode.objects.filter(team_id=team_id)
