"""A table's expectations as its writers checked them, batch after batch (docs/quality.md):
for its lineage page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from batches.tables import split_name
from processes.models import ExecState, InstanceExec, Property

RUNS_READ = 200  # the latest runs of the steps declaring rules on the table
BATCHES_SHOWN = 30  # the latest batches of each rule on the page


@dataclass
class RuleHistory:
    step: str
    rule: str
    rule_text: str
    action: str
    batches: list[str] = field(default_factory=list)  # "batch <n>", oldest first
    passed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)


def table_checks(team_id: int | None, qualified_name: str) -> list[RuleHistory]:
    """Each rule checked on the table ``db.table`` of the team, with its passed and failed
    rows per batch, from the latest step runs that checked it (failed ones too: a rule that
    fails a step is checked all the same)."""
    if team_id is None:
        return []
    database, table = (part.lower() for part in split_name(qualified_name))
    # The steps that declare a rule on a table of that name: their runs, not every run.
    declaring = Property.objects.filter(
        process__bus_domain__team_id=team_id,
        config_group="expect",
        key__istartswith=f"{table}.",
    ).values("process_id")
    runs = (
        InstanceExec.objects.filter(
            process_id__in=declaring, parent__isnull=False, end_ts__isnull=False
        )
        .exclude(checks=[])
        .exclude(exec_state_id=ExecState.RUNNING)
        .select_related("process", "parent")
        .order_by("-id")[:RUNS_READ]
    )
    found: dict[tuple[str, str], RuleHistory] = {}
    for run in reversed(list(runs)):
        for check in run.checks:
            if (str(check.get("database", "")).lower(), str(check["table"]).lower()) != (
                database,
                table,
            ):
                continue
            key = (run.process.name, check["rule"])
            history = found.setdefault(
                key, RuleHistory(run.process.name, check["rule"], check["rule_text"], "")
            )
            history.action = check["action"]
            history.rule_text = check["rule_text"]
            batch = run.parent.target_batch_id if run.parent else None
            history.batches.append(f"batch {batch}" if batch else f"run {run.pk}")
            history.passed.append(int(check["checked"]) - int(check["failed"]))
            history.failed.append(int(check["failed"]))
            history.last = check | {"run_id": run.parent_id or run.pk}
    for history in found.values():
        for series in (history.batches, history.passed, history.failed):
            del series[:-BATCHES_SHOWN]
    return sorted(found.values(), key=lambda h: (h.step, h.rule))
