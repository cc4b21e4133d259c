"""Lineage's master tables are seeded by migrations with BDRE's ids."""

from __future__ import annotations

import pytest

from lineage.models import LineageNodeType, LineageQueryType, NodeKind, QueryKind
from tests.helpers.database import rows

pytestmark = pytest.mark.django_db


def test_lineage_node_and_query_types():
    assert rows(LineageNodeType) == {
        1: "table",
        2: "column",
        3: "function",
        4: "temp_table",
        5: "idle_column",
        6: "constant",
    }
    assert rows(LineageQueryType) == {
        1: "hive",
        2: "pig",
        3: "spark_sql",
        4: "spark_load",
        5: "spark_cleanse",
        6: "spark_shred",
        7: "spark_export",
    }
    assert {k.value: k.name.lower() for k in NodeKind} == rows(LineageNodeType)
    assert {k.value: k.name.lower() for k in QueryKind} == rows(LineageQueryType)
