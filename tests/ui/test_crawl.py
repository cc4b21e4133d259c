"""A team member's walk through every page: from the dashboard, every link of every page is
followed, and none answers 404 or 500. The world is the demo's in miniature, without Spark:
an ingest job scanning a landing folder, a consumer job of ``python.callable`` steps that
succeeded, one that failed into the dead letter, queued rows, tables and lineage."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.test import Client

from lineage.models import LineageNode
from processes.models import InstanceExec
from tests.helpers.demo_world import build_demo_world, crawl
from tests.helpers.factories import TEST_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_world(team, tmp_path):
    return build_demo_world(team, tmp_path)


def test_a_developer_follows_every_link_of_every_page_without_a_404_or_500(team, demo_world):
    client = Client()
    assert client.login(username=team.developer.username, password=TEST_PASSWORD)
    walk = crawl(client)
    assert not walk.bad, "broken links:\n" + "\n".join(
        f"  {status} {link}  (on {page})" for page, link, status in walk.bad
    )
    # the walk reached the whole world: each job, every run, a batch, the queue, the lineage
    visited = {urlsplit(url).path for url in walk.pages}
    runs = InstanceExec.objects.filter(process__in=demo_world).values_list("pk", flat=True)
    assert {f"/jobs/{job.pk}/" for job in demo_world} <= visited
    assert {f"/runs/{pk}/" for pk in runs} <= visited
    table = LineageNode.objects.get(qualified_name="default.page_views")
    assert {"/queue/", "/batches/", f"/lineage/nodes/{table.pk}/"} <= visited
    assert any(path.startswith("/batches/") and path != "/batches/" for path in visited)
