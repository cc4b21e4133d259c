"""The step graph of a job or a template as the registry checks it: the links between steps
by name, and no cycle among them. The order itself is :func:`processes.workflow.topological_order`,
the one topological sort."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError

from processes.workflow import topological_order

if TYPE_CHECKING:
    from processes.registry.jobs import StepSpec
    from processes.registry.templates import TemplateStepSpec


def check_acyclic(edges: Mapping[str, Iterable[str]]) -> None:
    """A ValidationError on ``next_processes`` naming the first cycle among ``edges``
    (step name -> the names of the steps after it)."""
    _, cycle = topological_order(edges)
    if cycle:
        raise ValidationError({"next_processes": f"The steps form a cycle: {' -> '.join(cycle)}"})


def check_workflow(
    steps: Iterable[Mapping[str, Any] | StepSpec | TemplateStepSpec],
) -> dict[str, list[str]]:
    """The links between steps by name (``next`` absent or None: the next one listed);
    a ValidationError on ``next_processes`` for an unknown name or a cycle."""
    rows = [s if isinstance(s, Mapping) else vars(s) for s in steps]
    names = [r["name"] for r in rows]
    edges: dict[str, list[str]] = {}
    for index, row in enumerate(rows):
        after = row.get("next")
        edges[row["name"]] = names[index + 1 : index + 2] if after is None else list(after)
        unknown = set(edges[row["name"]]) - set(names)
        if unknown:
            raise ValidationError(
                {"next_processes": f"{row['name']}: unknown steps {sorted(unknown)}"}
            )
    check_acyclic(edges)
    return edges
