"""Finding a file's batch: the batches page and the API filter batches by a file's name, by a
table they have a published partition of, and by date; the list names each batch's files."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from batches.models import Partition
from tests.helpers.api import api_as
from tests.helpers.factories import BatchFactory, FileFactory, HiveTableFactory
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def batches(team, tmp_path):
    """Three batches of the team: two files, one file, and one that published lake.daily."""
    two = BatchFactory(bus_domain=team.application)
    FileFactory(batch=two, path="s3://landing/in/events_2026-11-01.tsv")
    FileFactory(batch=two, path="s3://landing/in/events_2026-11-02.tsv")
    one = BatchFactory(bus_domain=team.application)
    FileFactory(batch=one, path="/landing/in/pages_2026-11-02.tsv")
    summary = BatchFactory(bus_domain=team.application)
    daily = HiveTableFactory(bus_domain=team.application, dbname="lake", table_name="daily")
    Partition.objects.create(
        table=daily,
        batch=summary,
        location=str(tmp_path),
        state=Partition.State.PUBLISHED,
        written_at=timezone.now(),
    )
    other = BatchFactory(bus_domain=team.other_application)
    FileFactory(batch=other, path="/landing/ads/events_2026-11-01.tsv")
    return two, one, summary


def shown(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<td><a href="/batches/(\d+)/">', page)]


def test_a_file_name_finds_its_batch_once_whatever_its_files_and_the_list_names_them(team, batches):
    two, one, _ = batches
    client = client_as(team.viewer)
    page = client.get("/batches/", {"file": "events_2026-11-0"}).content.decode()
    assert shown(page) == [two.pk], "once, though both its files match; not another team's"
    assert (
        '<span title="s3://landing/in/events_2026-11-01.tsv">events_2026-11-01.tsv</span> '
        "and 1 more" in page
    )
    assert shown(client.get("/batches/", {"file": "2026-11-02"}).content.decode()) == [
        one.pk,
        two.pk,
    ]
    body = api_as(team.viewer).get("/api/v1/batches/", {"file": "pages_"}).json()
    assert [b["id"] for b in body["results"]] == [one.pk]


def test_a_table_finds_the_batches_it_was_published_for_and_dates_narrow_them(team, batches):
    _, _, summary = batches
    client = client_as(team.viewer)
    assert shown(client.get("/batches/", {"table": "dai"}).content.decode()) == [summary.pk]
    assert shown(client.get("/batches/", {"table": "lake.daily"}).content.decode()) == [summary.pk]
    assert shown(client.get("/batches/", {"table": "lake.dai"}).content.decode()) == []
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    page = client.get("/batches/", {"table": "daily", "created_after": tomorrow})
    assert shown(page.content.decode()) == []
