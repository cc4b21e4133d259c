"""The small ingest -> shred pipeline the Spark and the worker tests run."""

from __future__ import annotations

from pathlib import Path

from processes.models import BusDomain, Process
from processes.registry import StepSpec, create_job
from tests.factories import JOB_TYPE, grant_root

SCAN, SHRED, CALL, SQL = 52, 55, 51, 56


def shred_pipeline(
    application: BusDomain,
    landing: Path,
    *,
    manifest: str = "database",
    ttl_days: int = 180,
    lease_seconds: int = 3600,
    sql: str | None = None,
    prefix: str = "",
    max_retries: int = 3,
    shred_can_recover: bool = True,
    **dedup: str,
) -> tuple[Process, Process]:
    """``ingest`` scans ``landing``; ``shred`` shreds what it registered into the table
    ``lake.events`` (step ``shred_events``), then runs a step ``after``: a no-op, or the
    Spark SQL ``sql`` into ``lake.after``. ``prefix`` goes before the job and step names,
    for two pipelines in one test."""
    grant_root(application.team, landing)  # what the installation's superuser did
    ingest = create_job(
        bus_domain=application,
        name=f"{prefix}ingest",
        process_type_id=JOB_TYPE,
        steps=[
            StepSpec(
                f"{prefix}scan",
                SCAN,
                properties={"scan": {"location": landing.as_uri(), "min_age_seconds": "0"}},
            )
        ],
    )
    shred_job = create_job(
        bus_domain=application,
        name=f"{prefix}shred",
        process_type_id=JOB_TYPE,
        lease_seconds=lease_seconds,
        max_retries=max_retries,
        steps=[
            StepSpec(
                f"{prefix}shred_events",
                SHRED,
                can_recover=shred_can_recover,
                upstream=[ingest.pk],
                properties={
                    "shred": {"database": "lake", "atomic_table": "events"},
                    "dedup": {"manifest": manifest, "ttl_days": str(ttl_days), **dedup},
                },
            ),
            StepSpec(f"{prefix}after", CALL)
            if sql is None
            else StepSpec(
                f"{prefix}after",
                SQL,
                properties={"sql": {"query": sql, "output_table": "lake.after"}},
            ),
        ],
    )
    return ingest, shred_job
