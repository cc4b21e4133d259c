from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import orchestrator


class Command(JsonCommand):
    help = (
        "Terminate a job's running run: the run fails at once and the worker running it "
        "cancels its Spark work at its next heartbeat; its input is re-run next time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        parser.add_argument("--reason", default="terminated from the command line")

    def run(self, **o: Any) -> object:
        return {"terminated_run": orchestrator.terminate(o["process_id"], o["reason"])}
