"""Lineage nodes are shared within a team: one node per table and team, one per column of a
table."""

from __future__ import annotations

import pytest

from lineage.models import NodeKind
from tests.helpers.database import rejected
from tests.helpers.factories import (
    LineageNodeFactory,
    LineageQueryFactory,
    LineageRelationFactory,
    TeamFactory,
)

# backends: constraints (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


def test_a_table_node_exists_once():
    LineageNodeFactory(qualified_name="default.events")
    assert rejected(lambda: LineageNodeFactory(qualified_name="default.events"))


def test_a_table_node_exists_once_per_team_and_two_teams_may_each_have_one():
    first, second = TeamFactory(), TeamFactory()
    LineageNodeFactory(qualified_name="sales.orders", team=first)
    LineageNodeFactory(qualified_name="sales.orders", team=second)
    LineageNodeFactory(qualified_name="sales.orders", team=None)
    assert rejected(lambda: LineageNodeFactory(qualified_name="sales.orders", team=first))


def test_a_column_exists_once_per_table_but_may_repeat_across_tables():
    events = LineageNodeFactory(qualified_name="default.events")
    sessions = LineageNodeFactory(qualified_name="default.sessions")
    column = {"node_type_id": NodeKind.COLUMN, "qualified_name": "user_id"}
    LineageNodeFactory(container_node=events, **column)
    LineageNodeFactory(container_node=sessions, **column)
    assert rejected(lambda: LineageNodeFactory(container_node=events, **column))


def test_a_relation_is_recorded_once_per_query():
    relation = LineageRelationFactory()
    assert rejected(
        lambda: LineageRelationFactory(
            src_node=relation.src_node, target_node=relation.target_node, query=relation.query
        )
    )
    LineageRelationFactory(
        src_node=relation.src_node, target_node=relation.target_node, query=LineageQueryFactory()
    )
