from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Finish a step successfully (BDRE HaltStep)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sub-process-id", type=int, required=True)
        parser.add_argument("--instance-exec-id", type=int, default=None)

    def run(self, **o: Any) -> object:
        lifecycle.halt_step(o["sub_process_id"], instance_exec_id=o["instance_exec_id"])
        return {"halted": o["sub_process_id"]}
