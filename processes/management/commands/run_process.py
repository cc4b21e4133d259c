from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import RUN_FAILED, JsonCommand
from processes import orchestrator, scan_gate, tasks


class Command(JsonCommand):
    help = (
        "Run a job now: start a run and queue its steps on the workers, or with --wait run it "
        "here, step by step, "
        "and print what each step counted (exit status 3 when the run failed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        parser.add_argument("--max-batch", type=int, default=None)
        parser.add_argument(
            "--wait", action="store_true", help="run in this process instead of the workers"
        )
        parser.add_argument(
            "--force", action="store_true", help="run a paused job anyway (else exit 116)"
        )

    def run(self, **o: Any) -> object:
        if o["wait"]:
            return orchestrator.run_job(o["process_id"], max_batch=o["max_batch"], force=o["force"])
        started = tasks.start_run(o["process_id"], o["max_batch"], force=o["force"])
        if isinstance(started, scan_gate.Quiet):  # its scans found nothing new: no run
            return {
                "run": None,
                "started": False,
                "outcome": started.outcome,
                "detail": started.detail,
            }
        return {
            "run": started.instance_exec_id,
            "target_batch_id": started.target_batch_id,
            "is_rerun": started.is_rerun,
            "steps_queued": started.ready,
        }

    def exit_status(self, result: object) -> int:
        failed = isinstance(result, orchestrator.RunOutcome) and not result.succeeded
        return RUN_FAILED if failed else 0
