"""What the queue tells other apps (alerts, metrics) without knowing them: Django signals,
sent inside the transaction that changed the rows. A receiver that acts outside the
database defers that with ``transaction.on_commit``, so that a call that rolls back tells
nothing."""

from __future__ import annotations

from django.dispatch import Signal

# Queue rows went to the dead letter (DISCARDED): sender BatchConsumpQueue, with
# ``queue_ids`` (a list), ``reason`` and ``by_hand`` (a user discarded them, or their input
# failed max_retries runs).
dead_lettered = Signal()
