from __future__ import annotations

from typing import Any

from batches import queue
from bdre.commands import JsonCommand


class Command(JsonCommand):
    help = "Move a waiting or failed queue row to the dead letter, with a reason."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--queue-id", type=int, required=True)
        parser.add_argument("--reason", required=True)

    def run(self, **o: Any) -> object:
        row = queue.discard(o["queue_id"], o["reason"])
        return {"queue_id": row.pk, "batch_state": row.batch_state_id}
