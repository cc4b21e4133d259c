from __future__ import annotations

from django.core.management.base import CommandError

from bdre.commands import JsonCommand
from bdre.ids import is_id
from processes import registry
from processes.models import Process


class Command(JsonCommand):
    help = (
        "Print a job as a portable JSON document (steps, links, upstream jobs by name, "
        "properties, schedule) for import_job or POST /api/v1/processes/import/."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("job", help="the job's id or name")

    def run(self, **o: object) -> object:
        key = str(o["job"])
        lookup = {"pk": int(key)} if is_id(key) else {"name": key}
        job = Process.objects.filter(deleted=False, parent=None, **lookup).first()
        if job is None:
            raise CommandError(f"No live job {key!r}.")
        return registry.export_job(job)
