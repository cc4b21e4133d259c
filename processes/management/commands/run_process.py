from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import orchestrator, tasks


class Command(JsonCommand):
    help = (
        "Run a job now: queue it on the workers, or with --wait run it here, step by step, "
        "and print what each step counted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        parser.add_argument("--max-batch", type=int, default=None)
        parser.add_argument(
            "--wait", action="store_true", help="run in this process instead of the workers"
        )

    def run(self, **o: Any) -> object:
        if o["wait"]:
            return orchestrator.run_job(o["process_id"], max_batch=o["max_batch"])
        tasks.enqueue_run(o["process_id"], o["max_batch"])
        return {"queued": o["process_id"]}
