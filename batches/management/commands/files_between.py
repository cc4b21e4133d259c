from __future__ import annotations

from typing import Any

from batches import file_batches
from bdre.commands import JsonCommand


class Command(JsonCommand):
    help = "List the files of a step's batches from min to max batch id (BDRE GetFiles)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--sub-process-id", type=int, required=True)
        parser.add_argument("--min-batch-id", type=int, required=True)
        parser.add_argument("--max-batch-id", type=int, required=True)

    def run(self, **o: Any) -> object:
        files = file_batches.files_between(
            sub_process_id=o["sub_process_id"],
            min_batch_id=o["min_batch_id"],
            max_batch_id=o["max_batch_id"],
        )
        return [
            {
                "batch_id": f.batch_id,
                "path": f.path,
                "file_size": f.file_size,
                "file_hash": f.file_hash,
            }
            for f in files
        ]
