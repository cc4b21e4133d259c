from __future__ import annotations

from typing import Any

from batches import queue
from bdre.commands import JsonCommand


class Command(JsonCommand):
    help = "Put a discarded or failed queue row back as NEW."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--queue-id", type=int, required=True)

    def run(self, **o: Any) -> object:
        row = queue.requeue(o["queue_id"])
        return {"queue_id": row.pk, "batch_state": row.batch_state_id}
