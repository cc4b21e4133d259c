from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Start a run of a job: claim its input, create its target batch (BDRE InitJob)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        parser.add_argument("--max-batch", type=int, default=None)
        parser.add_argument(
            "--force", action="store_true", help="start a paused job anyway (else exit 116)"
        )

    def run(self, **o: Any) -> object:
        return lifecycle.init_job(o["process_id"], o["max_batch"], force=o["force"])
