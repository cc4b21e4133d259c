"""A step's log lines, written where its run is (``ProcessLog``) and to the Python log.
Used by the step kinds (``processes.step_kinds``) and by services below them (the ingestion scan),
which must not import the kinds."""

from __future__ import annotations

import logging

from processes.models import Process, ProcessLog


class StepLogger:
    """Writes a step's messages to ``ProcessLog`` (and to the Python log)."""

    def __init__(self, step: Process, run_id: int | None):
        self.step = step
        self.run_id = run_id
        self._log = logging.getLogger(f"bdre.step.{step.name}")

    def __call__(self, message_id: str, message: str, category: str = "step") -> None:
        self._log.info("%s: %s", message_id, message)
        ProcessLog.objects.create(
            process=self.step,
            instance_exec_id=self.run_id,
            log_category=category,
            message_id=message_id,
            message=message,
        )
