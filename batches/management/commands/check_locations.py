from __future__ import annotations

import itertools
import sys

from django.core.management.base import BaseCommand

from batches.locations import rows_outside
from processes.step_kinds.checks import steps_outside


class Command(BaseCommand):
    help = (
        "Report stored locations outside their team's storage roots: scan and export "
        "properties, registered files, servers whose root is not valid. Nothing is changed; "
        "exits 1 when there is any (docs/security.md)."
    )

    def handle(self, *args: object, **options: object) -> None:
        found = 0
        for row in itertools.chain(steps_outside(), rows_outside()):
            found += 1
            self.stdout.write(
                f"{row.kind} {row.row_id} (team {row.team_id}): {row.location}\n  {row.reason}"
            )
        if found:
            self.stderr.write(
                f"{found} stored location(s) outside their team's roots: grant a root (a "
                "server with root and granted_teams) or change them."
            )
            sys.exit(1)
        self.stdout.write("Every stored location lies inside its team's roots.")
