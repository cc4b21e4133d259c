"""What ``spark.shred`` refuses at registration, before any Spark runs."""

from __future__ import annotations

import pytest

from processes.models import Process
from tests.helpers.api import api_as

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["../../team-1/manifests/default", "a/b", "", "x" * 49])
def test_a_manifest_name_that_is_no_plain_word_is_a_400(team, name):
    response = api_as(team.developer).post(
        "/api/v1/processes/pipeline/",
        {
            "name": "shredder",
            "application": team.application.name,
            "process_type": "generic-job",
            "steps": [
                {
                    "name": "shredder_events",
                    "process_type": "generic-shred",
                    "properties": {"dedup": {"manifest": "parquet", "manifest_name": name}},
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "dedup.manifest_name must be" in response.content.decode()
    assert not Process.objects.filter(name__startswith="shredder").exists()
