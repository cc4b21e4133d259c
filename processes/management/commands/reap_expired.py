from __future__ import annotations

from typing import Any

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Terminate running instances whose lease expired, as term_job would."

    def run(self, **o: Any) -> object:
        return {"reaped": lifecycle.reap_expired()}
