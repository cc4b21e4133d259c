"""The lifecycle's runs, told to OpenLineage: a run's START and its end (COMPLETE, FAIL,
ABORT), each event sent after the commit (``lineage.announce``)."""

from __future__ import annotations

from django.dispatch import receiver

from lineage import announce
from processes.events import run_ended, run_started
from processes.models import ExecState


@receiver(run_started, dispatch_uid="bdre-openlineage-run-started")
def _run_started(sender: object, *, run_id: int, **kwargs: object) -> None:
    announce.announce(run_id, "START")


@receiver(run_ended, dispatch_uid="bdre-openlineage-run-ended")
def _run_ended(sender: object, *, run_id: int, state: int, error: str, **kwargs: object) -> None:
    announce.announce_end(run_id, ExecState(state), error)
