from __future__ import annotations

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Start a run of a job: claim its input, create its target batch (BDRE InitJob)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        parser.add_argument("--max-batch", type=int, default=None)

    def run(self, **o: object) -> object:
        return lifecycle.init_job(o["process_id"], o["max_batch"])
