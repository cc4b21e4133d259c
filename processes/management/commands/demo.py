from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bdre.worker import start_worker, stop_worker
from processes import demo, schedules


class Command(BaseCommand):
    help = (
        "The demo: a user, a team, a scheduled pipeline and sample landing files; with "
        "--run, an embedded Celery worker with Beat runs it on its schedule and a summary "
        "is printed; with --serve, the UI is then served while the worker keeps running."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", action="store_true", help="start the worker and wait")
        parser.add_argument(
            "--serve", action="store_true", help="then serve the UI (implies --run)"
        )
        parser.add_argument("--timeout", type=int, default=600, help="seconds to wait for a run")
        parser.add_argument("--files", type=int, default=3)
        parser.add_argument("--events", type=int, default=2000, help="events per file")
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument(
            "--scan-seconds",
            type=int,
            default=None,
            help=f"the scans' timer (default {demo.DEMO_SCAN_SECONDS}; an existing one is kept)",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        if o["scan_seconds"] is not None and o["scan_seconds"] < 1:
            raise CommandError("--scan-seconds must be 1 or more")
        setup = demo.set_up_demo(scan_seconds=o["scan_seconds"])
        out = self.stdout
        out.write(self.style.SUCCESS("BDRE demo is set up."))
        out.write(f"  team:        {setup.team.name}")
        out.write(f"  application: {setup.application.name}")
        for job in setup.jobs:
            steps = ", ".join(s.name for s in job.steps.order_by("id"))
            upstream = sorted(
                {u.name for s in job.steps.all() for u in s.enqueuing_processes.all()}
            )
            source = f" <- {', '.join(upstream)}" if upstream else ""
            out.write(f"  job {job.pk:>3} {job.name}{source}: {steps}")
        if o["run"] or o["serve"]:
            self._run(setup, o)
        out.write("")
        out.write(f"  UI:          http://{o['addrport']}/   admin: http://{o['addrport']}/admin/")
        for label, username, password, role in (
            ("login:     ", setup.username, setup.password, f"admin of team {setup.team.name}"),
            ("superuser: ", setup.superuser, setup.superuser_password, "the installation's"),
        ):
            if password:
                out.write(f"  {label}  {username} / {password}   ({role})")
            else:
                out.write(
                    f"  {label}  {username} (existing user, password unchanged; reset it "
                    f"with: manage.py changepassword {username})   ({role})"
                )
        if setup.password or setup.superuser_password:
            out.write(
                "  (passwords are printed this once. Log in as the team admin to see what a "
                "team sees; as the superuser for Django admin, every team and storage grants)"
            )
        if o["serve"]:
            out.write(
                f"  Drop more files into {demo.landing_folder(setup.team)}: the next scheduled "
                f"scan (every {schedules.schedule_of(setup.ingest.pk).every_seconds} s) "
                "picks them up."
            )
            out.flush()
            # A SIGTERM (not only Ctrl-C) also stops the worker started above.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            try:
                call_command("runserver", o["addrport"], use_reloader=False)
            finally:
                self._stop_worker()

    def _run(self, setup: demo.DemoSetup, o: dict[str, Any]) -> None:
        out = self.stdout
        landing = demo.landing_folder(setup.team)
        log = settings.VAR_DIR / "demo-worker.log"
        out.write(f"  starting the embedded worker with Beat (log: {log})")
        self.worker = start_worker(log)
        passes = demo.passes_done(setup)
        day = demo.day_of_next_drop(setup)
        files, seen = demo.generate_landing(landing, files=o["files"], events=o["events"], day=day)
        demo.generate_pages(landing)
        out.write(
            f"  dropped {len(files)} event files of {day} into {landing} (one still being "
            "written) and the shop's page list"
        )
        self._wait(
            "the scan and the shred to take the files in",
            lambda: demo.shredded(setup, files) and demo.pages_loaded(setup),
            o["timeout"],
            log,
        )
        out.write(f"  {day} is still open: the daily summary waits for its end")
        # New files while it runs: the next scheduled scan picks them up, their repeats of
        # the first files are cross-batch duplicates, and their day closes the day before.
        later = day + timedelta(days=1)
        files, _ = demo.generate_landing(
            landing, files=1, events=o["events"], day=later, repeat_from=seen, in_flight=False
        )
        out.write(
            f"  dropped {len(files)} more file, of {later}, repeating some events already "
            f"shredded: it closes {day}"
        )
        self._wait(
            f"the daily summary of {day} and its export",
            lambda: demo.passes_done(setup) > passes,
            o["timeout"],
            log,
        )
        out.write(self.style.SUCCESS("What happened:"))
        for line in demo.summary(setup).lines():
            out.write(line)
        if not o["serve"]:
            self._stop_worker()

    def _wait(self, what: str, done: Callable[[], bool], timeout: int, log: Path) -> None:
        out = self.stdout
        out.write(f"  waiting for {what} ", ending="")
        out.flush()
        deadline = time.monotonic() + timeout
        while not done():
            if self.worker.poll() is not None:
                raise CommandError(f"the worker stopped; see {log}")
            if time.monotonic() > deadline:
                self._stop_worker()
                raise CommandError(f"the pipeline did not finish in {timeout} s; see {log}")
            out.write(".", ending="")
            out.flush()
            time.sleep(1)
        out.write(" done.")

    def _stop_worker(self) -> None:
        worker = getattr(self, "worker", None)
        if worker is not None:
            stop_worker(worker, timeout=60)  # running steps get a minute to finish
