from __future__ import annotations

import argparse
import dataclasses
import sys

from django.core.exceptions import ValidationError

from bdre.commands import JsonCommand
from processes import schedules


class Command(JsonCommand):
    help = (
        "Show or change a job's schedule: --cron '0 2 * * *' [--timezone Europe/Paris] or "
        "--every SECONDS, --on-upstream / --no-on-upstream, --pause, --resume, --remove."
    )

    def add_arguments(self, parser) -> None:
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

    def run(self, **o: object) -> object:
        job = o["process_id"]
        try:
            if o["remove"]:
                schedules.remove(job)
            elif o["pause"]:
                schedules.pause(job)
            elif o["resume"]:
                schedules.resume(job)
            elif o["cron"] or o["every"] or o["on_upstream"] is not None:
                current = schedules.schedule_of(job)
                timed = bool(o["cron"] or o["every"])
                schedules.set_schedule(
                    job,
                    schedules.Schedule(
                        cron=o["cron"] or ("" if timed else current.cron),
                        every_seconds=o["every"] if timed else current.every_seconds,
                        timezone=o["timezone"] if timed else current.timezone,
                        # Changing only the trigger leaves a paused schedule paused.
                        enabled=True if timed or not current.is_timed else current.enabled,
                        on_upstream=(
                            current.on_upstream if o["on_upstream"] is None else o["on_upstream"]
                        ),
                    ),
                )
        except ValidationError as exc:
            self.stderr.write(f"invalid schedule: {exc.message_dict}")
            sys.exit(2)
        return dataclasses.asdict(schedules.schedule_of(job))
