"""The demo's pipeline as documents: one per job, in the format ``manage.py export_job``
writes and ``import_job`` reads (``bdre.pipeline/1``), in the order the demo registers them
(upstream first; a job's id follows it). :func:`documents` fills in what depends on the
installation: the team's landing and export folders and the scans' timer."""

from __future__ import annotations

import json
from typing import Any

DEMO_APPLICATION = "clickstream"

# The reference file's rules: what spark.cleanse keeps in default.pages, and why it sends a
# row to default.pages_invalid.
PAGE_RULES = [
    {"name": "page_url", "type": "string", "required": True, "pattern": "^https://"},
    {"name": "section", "type": "string", "required": True},
    {"name": "price", "type": "double", "required": True},
]

# Only the shred batches the run consumed: each run counts its own input once, and a rebuilt
# batch counts what it did.
DAILY_QUERY = (
    "SELECT to_date(collector_tstamp) AS day, count(*) AS page_views FROM atomic_events "
    "WHERE event = 'page_view' AND batch_id IN ({batch_ids}) GROUP BY to_date(collector_tstamp)"
)


def _scan(landing: str, include: str) -> dict[str, dict[str, str]]:
    return {
        "scan": {
            "location": landing,
            "include": include,
            "min_age_seconds": "5",
            # A file still being written holds the files after it back for 15 seconds at
            # most, then the scan moves past it.
            "hold_seconds": "15",
            "max_files": "1000",
            "reconcile_every": "10",
        }
    }


def _job(
    name: str,
    process_type: str,
    description: str,
    steps: list[dict[str, Any]],
    schedule: dict[str, Any],
    properties: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "format": "bdre.pipeline/1",
        "name": name,
        "application": DEMO_APPLICATION,
        "process_type": process_type,
        "description": description,
        "max_retries": 3,
        "lease_seconds": 3600,
        "properties": properties or {},
        "steps": steps,
        "schedule": schedule,
    }


def _step(
    name: str,
    process_type: str,
    description: str,
    properties: dict[str, dict[str, str]],
    *,
    upstream: list[str] | None = None,
    batch_cut_pattern: str = "",
    next: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "process_type": process_type,
        "description": description,
        "can_recover": True,
        "upstream": upstream or [],
        "batch_cut_pattern": batch_cut_pattern,
        "next": next or [],
        "properties": properties,
    }


# What each step's output must hold (docs/quality.md): an event without an id is taken out
# to the quarantine table, a second row for a day fails the daily summary before it is
# written, and a page that is not https is taken out.
EXPECTATIONS = {
    "clickstream_shred_events": {
        "atomic_events.event_id_present": "drop: event_id IS NOT NULL",
        "atomic_events.every_line_accounted": "fail: accounting()",
    },
    "clickstream_daily_summary": {"daily_page_views.one_row_a_day": "fail: unique(day)"},
    "clickstream_pages_cleanse": {
        "pages.https_url": "drop: page_url LIKE 'https://%'",
        "pages.every_row_accounted": "fail: accounting()",
    },
}

TIMER_KEY = "every_seconds"
AFTER_UPSTREAM = {"on_upstream": True}


def documents(*, landing: str, exports: str, scan_seconds: int) -> list[dict[str, Any]]:
    """The demo's jobs: ``landing`` the team's landing folder and ``exports`` its export
    folder (URIs), ``scan_seconds`` the scans' timer."""
    timer = {TIMER_KEY: scan_seconds}
    return [
        _events_ingest(landing, timer),
        _shred(),
        _daily(),
        _export(exports),
        _pages_ingest(landing, timer),
        _pages(),
    ]


def _events_ingest(landing: str, timer: dict[str, Any]) -> dict[str, Any]:
    return _job(
        "clickstream_ingest",
        "ingestion-job",
        "Registers new enriched-event files from the landing folder.",
        [
            _step(
                "clickstream_ingest_scan",
                "file-scan",
                "Marker listing of the landing folder's event files (*.tsv).",
                _scan(landing, "*.tsv"),
            )
        ],
        timer,
    )


def _shred() -> dict[str, Any]:
    return _job(
        "clickstream_shred",
        "load-job",
        "Shreds enriched events into atomic events and contexts, deduplicated.",
        [
            _step(
                "clickstream_shred_events",
                "spark-shred",
                "Enriched TSV to atomic events with four dedup strategies.",
                {
                    "shred": {"atomic_table": "atomic_events"},
                    "dedup": {
                        "in_batch_natural": "true",
                        "cross_batch_natural": "true",
                        "in_batch_synthetic": "true",
                        "cross_batch_synthetic": "true",
                        "manifest": "database",
                        "ttl_days": "180",
                    },
                    "expect": EXPECTATIONS["clickstream_shred_events"],
                },
                upstream=["clickstream_ingest"],
            )
        ],
        AFTER_UPSTREAM,
        # Each batch is marked with the days of its events; the first batch of a later day
        # closes the days before it (EOD@<day>), where the daily step cuts.
        properties={"run": {"close_days": "on_later_day"}},
    )


def _daily() -> dict[str, Any]:
    return _job(
        "clickstream_daily",
        "semantic-job",
        "Daily page-view summary of each closed day, cut at its end-of-day batch.",
        [
            _step(
                "clickstream_daily_summary",
                "spark-sql",
                "",
                {
                    "sql": {"output_table": "daily_page_views", "query": DAILY_QUERY},
                    "expect": EXPECTATIONS["clickstream_daily_summary"],
                },
                upstream=["clickstream_shred"],
                batch_cut_pattern="EOD",
            )
        ],
        AFTER_UPSTREAM,
    )


def _export(exports: str) -> dict[str, Any]:
    return _job(
        "clickstream_daily_export",
        "export-job",
        "Hands each daily summary to the reporting tools as CSV files.",
        [
            _step(
                "clickstream_daily_export_csv",
                "spark-export",
                "daily_page_views, one folder of CSV files per batch.",
                {
                    "export": {
                        "source_table": "default.daily_page_views",
                        "format": "csv",
                        "location": exports,
                    }
                },
                upstream=["clickstream_daily"],
            )
        ],
        AFTER_UPSTREAM,
    )


def _pages_ingest(landing: str, timer: dict[str, Any]) -> dict[str, Any]:
    return _job(
        "clickstream_pages_ingest",
        "ingestion-job",
        "Registers the shop's page lists from the landing folder.",
        [
            _step(
                "clickstream_pages_scan",
                "file-scan",
                "Marker listing of the landing folder's page lists (pages-*.csv).",
                _scan(landing, "pages-*.csv"),
            )
        ],
        timer,
    )


def _pages() -> dict[str, Any]:
    return _job(
        "clickstream_pages",
        "load-job",
        "Loads each page list and keeps its valid rows.",
        [
            _step(
                "clickstream_pages_load",
                "spark-load",
                "The CSV files as they are, into default.pages_raw.",
                {"load": {"format": "csv", "table": "default.pages_raw"}},
                upstream=["clickstream_pages_ingest"],
                next=["clickstream_pages_cleanse"],
            ),
            _step(
                "clickstream_pages_cleanse",
                "spark-cleanse",
                "Valid rows, typed, to default.pages; the others, with why.",
                {
                    "cleanse": {
                        "source_table": "default.pages_raw",
                        "clean_table": "default.pages",
                        "invalid_table": "default.pages_invalid",
                        "rules": json.dumps(PAGE_RULES),
                    },
                    "expect": EXPECTATIONS["clickstream_pages_cleanse"],
                },
            ),
        ],
        AFTER_UPSTREAM,
    )
