from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from bdre.commands import JsonCommand, team_named
from processes import registry
from processes.serializers.pipelines import PipelineSerializer


class Command(JsonCommand):
    help = (
        "Register a job from a JSON document written by export_job (or GET "
        "/api/v1/processes/{id}/export/): all of it or, on any invalid field, nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the document, or - for standard input")
        parser.add_argument(
            "--team",
            default=None,
            help="the team (name or id) whose application and upstream jobs the document "
            "names: names are per team",
        )

    def run(self, **o: Any) -> object:
        try:
            if o["file"] == "-":
                document = json.load(sys.stdin)
            else:
                document = json.loads(Path(str(o["file"])).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"Cannot read the document: {exc}") from exc
        # No request: an operator sees every job, or those of --team.
        team = team_named(str(o["team"])) if o["team"] is not None else None
        parsed = PipelineSerializer(data=document, context={"team": team})
        if not parsed.is_valid():
            raise CommandError(json.dumps(parsed.errors))
        try:
            job = registry.register_pipeline(parsed.spec())
        except registry.ValidationError as exc:
            raise CommandError(json.dumps(exc.message_dict)) from exc
        return {"id": job.pk, "name": job.name, "steps": job.steps.count()}
