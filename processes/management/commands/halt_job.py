from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Finish a job run: queue its batch downstream, archive its input (BDRE HaltJob)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        parser.add_argument("--batch-marking", default=None)
        parser.add_argument("--instance-exec-id", type=int, default=None)

    def run(self, **o: Any) -> object:
        lifecycle.halt_job(
            o["process_id"], o["batch_marking"], instance_exec_id=o["instance_exec_id"]
        )
        return {"halted": o["process_id"]}
