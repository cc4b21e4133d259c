"""The small ingest -> shred pipeline the Spark and the worker tests run."""

from __future__ import annotations

from pathlib import Path

from processes.models import BusDomain, Process
from processes.registry import StepSpec, create_job
from tests.factories import JOB_TYPE

SCAN, SHRED, CALL = 52, 55, 51


def shred_pipeline(
    application: BusDomain,
    landing: Path,
    *,
    manifest: str = "database",
    ttl_days: int = 180,
    lease_seconds: int = 3600,
    **dedup: str,
) -> tuple[Process, Process]:
    """``ingest`` scans ``landing``; ``shred`` shreds what it registered into the table
    ``lake.events`` (step ``shred_events``), then runs a no-op step ``after``."""
    ingest = create_job(
        bus_domain=application,
        name="ingest",
        process_type_id=JOB_TYPE,
        steps=[
            StepSpec(
                "scan",
                SCAN,
                properties={"scan": {"location": landing.as_uri(), "min_age_seconds": "0"}},
            )
        ],
    )
    shred_job = create_job(
        bus_domain=application,
        name="shred",
        process_type_id=JOB_TYPE,
        lease_seconds=lease_seconds,
        steps=[
            StepSpec(
                "shred_events",
                SHRED,
                upstream=[ingest.pk],
                properties={
                    "shred": {"database": "lake", "atomic_table": "events"},
                    "dedup": {"manifest": manifest, "ttl_days": str(ttl_days), **dedup},
                },
            ),
            StepSpec("after", CALL),
        ],
    )
    return ingest, shred_job
