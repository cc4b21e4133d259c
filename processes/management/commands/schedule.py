from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import schedules, tasks


class Command(JsonCommand):
    help = (
        "Show or change a job's schedule: --cron '0 2 * * *' [--timezone Europe/Paris] or "
        "--every SECONDS, --on-upstream / --no-on-upstream, --pause, --resume, --remove."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--process-id", type=int, required=True)
        timing = parser.add_mutually_exclusive_group()
        timing.add_argument("--cron", default=None)
        timing.add_argument("--every", type=int, default=None, help="seconds")
        parser.add_argument("--timezone", default="UTC")
        parser.add_argument("--on-upstream", action=argparse.BooleanOptionalAction, default=None)
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--pause", action="store_true")
        action.add_argument("--resume", action="store_true")
        action.add_argument("--remove", action="store_true")

    def run(self, **o: Any) -> object:
        job = o["process_id"]
        try:
            if o["remove"]:
                schedules.remove(job)
            elif o["pause"]:
                schedules.pause(job)
            elif o["resume"]:
                tasks.resume(job)
            elif o["cron"] or o["every"]:
                on_upstream = o["on_upstream"]
                if on_upstream is None:
                    on_upstream = schedules.runs_on_upstream(job)
                schedules.change_timing(
                    job,
                    schedules.Schedule(
                        cron=o["cron"] or "",
                        every_seconds=o["every"],
                        timezone=o["timezone"],
                        on_upstream=on_upstream,
                    ),
                )
            elif o["on_upstream"] is not None:
                schedules.set_on_upstream(job, o["on_upstream"])
        except ValidationError as exc:
            self.stderr.write(f"invalid schedule: {exc.message_dict}")
            sys.exit(2)
        return dataclasses.asdict(schedules.schedule_of(job))
