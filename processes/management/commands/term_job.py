from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Fail a job run: its input stays queued for the re-run (BDRE TermJob)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        parser.add_argument("--error", default=None)
        parser.add_argument("--instance-exec-id", type=int, default=None)

    def run(self, **o: Any) -> object:
        lifecycle.term_job(o["process_id"], o["error"], instance_exec_id=o["instance_exec_id"])
        return {"terminated": o["process_id"]}
