from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from bdre.commands import JsonCommand, team_named
from bdre.ids import is_id
from processes import registry
from processes.models import Process


class Command(JsonCommand):
    help = (
        "Print a job as a portable JSON document (steps, links, upstream jobs by name, "
        "properties, schedule) for import_job or POST /api/v1/processes/import/."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job", help="the job's id or name")
        parser.add_argument(
            "--team", default=None, help="the team (name or id) of the job: names are per team"
        )

    def run(self, **o: Any) -> object:
        key = str(o["job"])
        lookup = {"pk": int(key)} if is_id(key) else {"name": key}
        jobs = Process.objects.filter(deleted=False, parent=None, **lookup)
        if o["team"] is not None:
            jobs = jobs.filter(bus_domain__team=team_named(str(o["team"])))
        found = list(jobs.select_related("bus_domain__team")[:10])
        if not found:
            raise CommandError(f"No live job {key!r}.")
        if len(found) > 1:  # names are per team (docs/security.md)
            listed = ", ".join(sorted(j.bus_domain.team.name for j in found))
            raise CommandError(f"Jobs named {key} are in teams {listed}: give its id or --team.")
        return registry.export_job(found[0])
