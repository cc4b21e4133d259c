from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from batches import file_batches
from batches.locations import LocationRefused
from bdre.commands import JsonCommand


class Command(JsonCommand):
    help = "Register a file into a new batch and queue it for every downstream step."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--source-process-id", type=int, required=True)
        parser.add_argument("--path", required=True)
        parser.add_argument("--file-size", type=int, required=True)
        parser.add_argument("--file-hash", required=True)
        parser.add_argument(
            "--creation-ts", type=datetime.fromisoformat, default=None, help="ISO 8601; now"
        )
        parser.add_argument("--server-id", type=int, default=None)
        parser.add_argument("--batch-marking", default=None)

    def run(self, **o: Any) -> object:
        try:
            batch = file_batches.register_file(
                source_process_id=o["source_process_id"],
                path=o["path"],
                file_size=o["file_size"],
                file_hash=o["file_hash"],
                creation_ts=o["creation_ts"] or timezone.now(),
                server_id=o["server_id"],
                batch_marking=o["batch_marking"],
            )
        except LocationRefused as exc:
            raise CommandError(str(exc)) from exc
        return {"batch_id": batch.pk}
