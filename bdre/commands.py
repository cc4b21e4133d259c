"""The base of the lifecycle commands: print the result as JSON; on a BdreError print
``{"code", "message"}`` to stderr and exit with the code as the status (101 to 120).

Exit statuses, for scripts (README, "From the command line"): 0 done; 1 any other error
(Django's CommandError, a crash); 2 a usage error (argparse); 3 the command ran and what it
ran failed (``run_process --wait`` of a run that failed); 101-120 the services' codes. The
codes are not ``code - 100``: 102 would then be 2, a usage error to any script."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, is_dataclass
from datetime import date, datetime

from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError

from bdre.errors import BdreError
from bdre.ids import is_id

RUN_FAILED = 3


def _default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def team_named(key: str) -> Group:
    """A team by id or by name (team names are unique in the installation), for the
    commands' ``--team``: the names of applications and processes are per team."""
    team = Group.objects.filter(**({"pk": int(key)} if is_id(key) else {"name": key})).first()
    if team is None:
        raise CommandError(f"No team {key!r}.")
    return team


class JsonCommand(BaseCommand):
    def run(self, **options: object) -> object:
        raise NotImplementedError

    def exit_status(self, result: object) -> int:
        """The status of a result printed in full: 0, or ``RUN_FAILED`` when what ran failed."""
        return 0

    def handle(self, *args: object, **options: object) -> None:
        try:
            result = self.run(**options)
        except BdreError as error:
            self.stderr.write(json.dumps(error.as_dict()))
            sys.exit(int(error.code))
        status = self.exit_status(result)
        if hasattr(result, "as_dict"):
            result = result.as_dict()
        self.stdout.write(json.dumps(result, default=_default, indent=2))
        if status:
            sys.exit(status)
