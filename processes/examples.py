"""Functions for ``python.callable`` steps that every installation allows (the default of
``BDRE_CALLABLES``): examples of the signature, and harmless steps to build a job with."""

from __future__ import annotations

from processes.step_kinds import Counters, StepContext


def noop(context: StepContext) -> Counters:
    """Does nothing: a placeholder step."""
    return {}


def log_batches(context: StepContext) -> Counters:
    """Writes the batches and files the step claimed to the run's log."""
    context.log("batches", f"batches {context.batch_ids}, {len(context.files)} files")
    return {"batches": len(context.batch_ids), "files": len(context.files)}
