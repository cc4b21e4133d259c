"""The registration pages say what each step kind takes: every step type with the properties
its kind reads, their defaults and what they are, from the kinds' own declarations; the
page's script shows a chosen kind's under its step (tests/ui/test_browser.py)."""

from __future__ import annotations

import json
import re

import pytest

from processes import step_kinds
from processes.models import ProcessType
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db


def test_every_step_type_is_listed_with_what_its_kind_reads(team, make_job):
    kinds = ProcessType.objects.filter(parent_process_type__isnull=False)
    for url in ("/jobs/new/", f"/jobs/{make_job('daily', steps=1).pk}/edit/"):
        page = client_as(team.developer).get(url).content.decode()
        assert page.count("<details data-kind=") == kinds.count()
        listed = json.loads(re.search(r'id="step-kinds"[^>]*>(.*?)</script>', page, re.S)[1])
        sql = next(k for k in listed if k["kind"] == "spark.sql")
        assert {
            "key": "sql.output_table",
            "default": "default.{step}",
            "help": "the table written (db.table)",
        } in sql["properties"]
        assert "<td><code>sql.query</code></td><td>none</td><td>one SELECT over the team" in page


def test_a_kind_says_its_keys_and_an_unknown_one_says_nothing():
    keys = [key for key, _, _ in step_kinds.documented("spark.sql")]
    assert keys == ["sql.query", "sql.output_table"]
    assert step_kinds.documented("no.such_kind") == []
