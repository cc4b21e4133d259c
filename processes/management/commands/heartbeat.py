from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Renew the lease of a running instance."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--instance-exec-id", type=int, required=True)

    def run(self, **o: Any) -> object:
        return {"lease_expires_at": lifecycle.heartbeat(o["instance_exec_id"])}
