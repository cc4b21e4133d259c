from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from batches.ingest.scan import ScanConfigError, ScanResult
from batches.ingest.storage import StorageError
from bdre.errors import BdreError
from processes import orchestrator
from processes.models import Process


class Command(BaseCommand):
    help = (
        "Scan an ingestion job's location and register new files as batches: runs the job "
        "(init_job, the scan step, halt_job) and prints what the scan found."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--process-id", type=int, required=True, help="The ingestion job or its scan step."
        )
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--reconcile", action="store_true", default=None, help="Also list below the marker."
        )
        group.add_argument(
            "--no-reconcile", dest="reconcile", action="store_false", help="Skip reconciliation."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        process = Process.objects.filter(pk=options["process_id"], deleted=False).first()
        if process is None:
            raise CommandError(f"process {options['process_id']} does not exist")
        job = process.parent or process
        interactive = self.stderr.isatty()

        def progress(result: ScanResult) -> None:
            line = (
                f"listed {result.listed:>9,}  registered {result.registered:>7,}  "
                f"in flight {result.skipped_in_flight:>5,}  late {result.late:>5,}"
            )
            if interactive:
                self.stderr.write(f"\r{line}", ending="")
            else:
                self.stderr.write(line)

        try:
            outcome = orchestrator.run_job(
                job.pk, options={"reconcile": options["reconcile"], "progress": progress}
            )
        except (BdreError, ScanConfigError, StorageError) as error:
            raise CommandError(str(error)) from error
        if interactive:
            self.stderr.write("")
        if not outcome.succeeded:
            raise CommandError(f"run {outcome.instance_exec_id} failed: {outcome.error}")
        for step_id, counters in outcome.steps.items():
            if "listed" not in counters:
                continue
            name = Process.objects.get(pk=step_id).name
            self.stdout.write(self.style.SUCCESS(f"{name} (run {outcome.instance_exec_id}):"))
            for key in (
                "listed",
                "list_calls",
                "registered",
                "already_registered",
                "skipped_in_flight",
                "skipped_young",
                "skipped_empty",
                "late",
                "overwritten",
                "reconciled",
                "capped",
                "marker",
            ):
                self.stdout.write(f"  {key.replace('_', ' '):<20} {counters[key]}")
        sys.stdout.flush()
