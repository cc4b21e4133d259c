from __future__ import annotations

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Start a step of the running job (BDRE InitStep)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--sub-process-id", type=int, required=True)

    def run(self, **o: object) -> object:
        return {"sub_instance_exec_id": lifecycle.init_step(o["sub_process_id"])}
