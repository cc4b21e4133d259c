"""Give every existing lineage node the team whose queries touched it.

A table node touched by the queries of one team (with its columns) becomes that team's. A
table node several teams' queries touched (the leak this closes: one ``sales.orders`` node
carried the columns and edges of every team using the name) stays with the team of its
earliest relation, and each other team gets a copy of the table with the columns its own
queries touched; its relations move to the copy. A column of such a table that no relation
touches cannot be attributed to a team and is deleted (it only ever had a name). A node that
no relation touches keeps no team: only superusers see it."""

from django.db import migrations
from django.db.models import Q

TEAM = "query__process__bus_domain__team_id"


def split_per_team(apps, schema_editor):
    Node = apps.get_model("lineage", "LineageNode")
    Relation = apps.get_model("lineage", "LineageRelation")
    tables = list(
        Node.objects.filter(container_node__isnull=True).order_by("id").values_list("id", flat=True)
    )
    for table_id in tables:
        table = Node.objects.get(pk=table_id)
        children = list(Node.objects.filter(container_node=table).order_by("id"))
        family = [table.pk, *(c.pk for c in children)]
        touching = Relation.objects.filter(Q(src_node_id__in=family) | Q(target_node_id__in=family))
        teams: list[int | None] = []
        for _, team in touching.order_by("id").values_list("id", TEAM):
            if team not in teams:
                teams.append(team)
        if not teams:
            continue
        first, *others = teams
        Node.objects.filter(pk__in=family).update(team_id=first)
        for team in others:
            theirs = touching.filter(
                **{TEAM: team} if team is not None else {f"{TEAM}__isnull": True}
            )
            touched = set(theirs.values_list("src_node_id", flat=True))
            touched |= set(theirs.values_list("target_node_id", flat=True))
            copy = {table.pk: _copy(Node, table, team, None)}
            for child in children:
                if child.pk in touched:
                    copy[child.pk] = _copy(Node, child, team, copy[table.pk])
            for relation in theirs:
                relation.src_node_id = copy.get(relation.src_node_id, relation.src_node_id)
                relation.target_node_id = copy.get(relation.target_node_id, relation.target_node_id)
                relation.save(update_fields=["src_node", "target_node"])
        if others:
            # left with no relation: the columns only other teams touched (now copied) and
            # those no query's edge ever named (no team to give them to)
            Node.objects.filter(
                container_node=table, outgoing__isnull=True, incoming__isnull=True
            ).delete()


def _copy(Node, node, team, container):
    return Node.objects.create(
        node_type_id=node.node_type_id,
        container_node_id=container,
        node_order=node.node_order,
        qualified_name=node.qualified_name,
        display_name=node.display_name,
        dot_label=node.dot_label,
        dot_string=node.dot_string,
        team_id=team,
    ).pk


class Migration(migrations.Migration):
    dependencies = [
        ("lineage", "0004_nodes_per_team"),
        ("processes", "0001_initial"),
    ]

    operations = [migrations.RunPython(split_per_team, migrations.RunPython.noop)]
