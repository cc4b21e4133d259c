"""The Prometheus metrics as a scrape reads them."""

from __future__ import annotations

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families


def scrape() -> dict[tuple[str, frozenset], float]:
    response = Client().get("/metrics")
    assert response.status_code == 200, response.content
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


def labels(**values: str) -> frozenset:
    return frozenset(values.items())
