"""The small ingest -> shred pipeline the Spark and the worker tests run."""

from __future__ import annotations

from pathlib import Path

from processes.models import BusDomain, Process
from processes.registry import StepSpec
from tests.helpers.factories import grant_root
from tests.helpers.jobs import SHRED, build_job, callable_step, scan_step, sql_step


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
    ingest = build_job(application, f"{prefix}ingest", [scan_step(f"{prefix}scan", landing)])
    shred_job = build_job(
        application,
        f"{prefix}shred",
        [
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
            callable_step(f"{prefix}after")
            if sql is None
            else sql_step(f"{prefix}after", sql, output="lake.after"),
        ],
        lease_seconds=lease_seconds,
        max_retries=max_retries,
    )
    return ingest, shred_job
