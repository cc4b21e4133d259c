"""BDRE's error codes: the rules the services enforce, each with a stable number, one
meaning and one HTTP status, declared here and nowhere else (docs/api.md lists them)."""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    MAX_BATCH_NULL = 101
    INVALID_PARENT_PROCESS = 102
    INVALID_SUB_PROCESS = 103
    PARENT_ALREADY_RUNNING = 104
    PROCESS_NOT_RUNNING = 105
    SUB_PROCESS_ALREADY_RUNNING = 106
    SUB_PROCESS_NOT_RUNNING = 107
    PARENT_NOT_RUNNING = 108
    BATCHES_MISSING_FOR_CUT = 109
    SUB_PROCESS_RUNNING = 110
    SUB_PROCESS_FAILED = 111
    NO_BATCHES = 112
    BATCHES_OF_DIFFERENT_STEPS = 113
    BATCH_NOT_QUEUED = 114
    LEASE_LOST = 115
    JOB_PAUSED = 116
    UNKNOWN_ROW = 117
    QUEUE_STATE_CONFLICT = 118
    INVALID_RANGE = 119
    OTHER_TEAMS_BATCH = 120
    PARTITION_UNREADABLE = 121


MESSAGES: dict[Code, str] = {
    Code.MAX_BATCH_NULL: "Max batch cannot be null",
    Code.INVALID_PARENT_PROCESS: "Invalid parent process",
    Code.INVALID_SUB_PROCESS: "Invalid sub-process",
    Code.PARENT_ALREADY_RUNNING: "Parent Process is already running",
    Code.PROCESS_NOT_RUNNING: "The process is not running",
    Code.SUB_PROCESS_ALREADY_RUNNING: "This sub process is already running",
    Code.SUB_PROCESS_NOT_RUNNING: "This sub process is not running",
    Code.PARENT_NOT_RUNNING: "The parent process is not running",
    Code.BATCHES_MISSING_FOR_CUT: "Not all necessary batches are present for the sub process",
    Code.SUB_PROCESS_RUNNING: "Sub process in running state",
    Code.SUB_PROCESS_FAILED: "Sub process in failed state",
    Code.NO_BATCHES: "No batches present for one of the sub processes",
    Code.BATCHES_OF_DIFFERENT_STEPS: (
        "Min batch and max batch do not belong to the same sub process"
    ),
    Code.BATCH_NOT_QUEUED: "Batch not present in the process_batch_queue table",
    Code.LEASE_LOST: "Lease lost: this run was expired and replaced",
    Code.JOB_PAUSED: "The job is paused",
    Code.UNKNOWN_ROW: "No such batch, file, queue row or run",
    Code.QUEUE_STATE_CONFLICT: "The queue rows are not in a state that allows this",
    Code.INVALID_RANGE: "The range is empty: its start is after its end",
    Code.OTHER_TEAMS_BATCH: "A batch downstream belongs to another team's job",
    Code.PARTITION_UNREADABLE: "The partition's rows cannot be read",
}

# HTTP status of each code in the REST API: unknown ids are 404, state conflicts 409,
# invalid input 400.
HTTP_STATUS: dict[Code, int] = {
    Code.MAX_BATCH_NULL: 400,
    Code.INVALID_PARENT_PROCESS: 404,
    Code.INVALID_SUB_PROCESS: 404,
    Code.PARENT_ALREADY_RUNNING: 409,
    Code.PROCESS_NOT_RUNNING: 409,
    Code.SUB_PROCESS_ALREADY_RUNNING: 409,
    Code.SUB_PROCESS_NOT_RUNNING: 409,
    Code.PARENT_NOT_RUNNING: 409,
    Code.BATCHES_MISSING_FOR_CUT: 409,
    Code.SUB_PROCESS_RUNNING: 409,
    Code.SUB_PROCESS_FAILED: 409,
    Code.NO_BATCHES: 409,
    Code.BATCHES_OF_DIFFERENT_STEPS: 400,
    Code.BATCH_NOT_QUEUED: 400,
    Code.LEASE_LOST: 409,
    Code.JOB_PAUSED: 409,
    Code.UNKNOWN_ROW: 404,
    Code.QUEUE_STATE_CONFLICT: 409,
    Code.INVALID_RANGE: 400,
    Code.OTHER_TEAMS_BATCH: 409,
    Code.PARTITION_UNREADABLE: 404,
}


class BdreError(Exception):
    """A rule of the lifecycle was broken. ``code`` is one of :class:`Code`."""

    def __init__(self, code: int, message: str | None = None):
        self.code = Code(code)
        base = MESSAGES[self.code]
        self.message = f"{base}: {message}" if message else base
        super().__init__(f"{int(self.code)} {self.message}")

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    def as_dict(self) -> dict[str, object]:
        return {"code": int(self.code), "message": self.message}


class Conflict(Exception):
    """A registry change the current state forbids (deleting a job that is running or that
    other jobs consume): HTTP 409 with ``{"detail": message}``."""
