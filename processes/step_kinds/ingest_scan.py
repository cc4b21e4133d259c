"""``ingest.scan``: register the new files of a location as batches (DESIGN.md section 5)."""

from __future__ import annotations

from batches.ingest.scan import scan
from batches.locations import StepLocations, check_scan_locations
from processes.step_kinds import Counters, Prop, StepContext, StepKind, Table, register


def ingest_scan(context: StepContext) -> Counters:
    context.record_input(context.properties("scan").get("location", ""))
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


KIND = register(
    StepKind(
        "ingest.scan",
        ingest_scan,
        # The scan reads its own defaults (batches.ingest.scan.ScanOptions).
        properties={
            "scan": {
                "location": Prop(help="the folder or prefix to list (required)"),
                "server": Prop(help="the granted server to list it with"),
                "min_age_seconds": Prop(help="seconds a file must be old to be taken"),
                "hold_seconds": Prop(help="seconds a held file waits"),
                "in_flight_patterns": Prop(help="names being written, skipped"),
                "include": Prop(help="the file names this step takes (fnmatch patterns)"),
                "max_files": Prop(help="the most files one scan registers"),
                "reconcile_every": Prop(help="a full listing every so many scans"),
                "on_overwrite": Prop(help="a file rewritten in place: ignore or reprocess"),
                "page_size": Prop(help="keys listed per call"),
                "region": Prop(help="the object store's region"),
            }
        },
        reads=(Table("scan", "location", location=True),),
        locations=StepLocations(
            "scan", ("location", "server", "endpoint_url"), check_scan_locations
        ),
    )
)
