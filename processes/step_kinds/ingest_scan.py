"""``ingest.scan``: register the new files of a location as batches (DESIGN.md section 5)."""

from __future__ import annotations

from batches.ingest.scan import scan
from processes.step_kinds import Counters, StepContext, register


@register("ingest.scan")
def ingest_scan(context: StepContext) -> Counters:
    result = scan(
        context.step.pk,
        reconcile=context.options.get("reconcile"),
        run_id=context.step_run_id,
        progress=context.options.get("progress"),
    )
    context.log(
        "scan_summary",
        f"listed {result.listed} keys in {result.list_calls} calls, registered "
        f"{result.registered}, in flight {result.skipped_in_flight}, young "
        f"{result.skipped_young}, empty {result.skipped_empty}, unsafe names "
        f"{result.skipped_unsafe}, hard links {result.skipped_hard_link}, not regular files "
        f"{result.skipped_not_regular}, late {result.late}, "
        f"overwritten {result.overwritten}"
        + (f", other steps' files {result.skipped_excluded}" if result.skipped_excluded else ""),
        "scan",
    )
    return result.counters()
