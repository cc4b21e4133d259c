from __future__ import annotations

from bdre.commands import JsonCommand
from processes import lifecycle


class Command(JsonCommand):
    help = "Terminate running instances whose lease expired, as term_job would."

    def run(self, **o: object) -> object:
        return {"reaped": lifecycle.reap_expired()}
