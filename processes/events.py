"""What the lifecycle tells other apps (OpenLineage, alerts, metrics) without knowing them: Django
signals, sent inside the lifecycle's transaction. A receiver that acts outside the database
(sends a message, an e-mail) defers that with ``transaction.on_commit``, so that a call that
rolls back tells nothing."""

from __future__ import annotations

from django.dispatch import Signal

# A run (of a job or of a step) started: sender InstanceExec, with ``run_id``, ``process_id``
# and ``parent_id`` (None for a job's run).
run_started = Signal()

# A run (of a job or of a step) ended, however it ended (halted, failed, failed with its job's
# run, reaped): sender InstanceExec, with ``run_id``, ``process_id``, ``parent_id`` (None for
# a job's run), ``state`` (an ExecState) and ``error``.
run_ended = Signal()
