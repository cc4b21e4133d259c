"""The base of the lifecycle commands: print the result as JSON; on a BdreError print
``{"code", "message"}`` to stderr and exit with status ``code - 100`` (1 to 15)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, is_dataclass
from datetime import date, datetime

from django.core.management.base import BaseCommand

from bdre.errors import BdreError


def _default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class JsonCommand(BaseCommand):
    def run(self, **options: object) -> object:
        raise NotImplementedError

    def handle(self, *args: object, **options: object) -> None:
        try:
            result = self.run(**options)
        except BdreError as error:
            self.stderr.write(json.dumps(error.as_dict()))
            sys.exit(int(error.code) - 100)
        if hasattr(result, "as_dict"):
            result = result.as_dict()
        self.stdout.write(json.dumps(result, default=_default, indent=2))
