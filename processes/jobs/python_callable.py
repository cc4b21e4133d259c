"""``python.callable``: call a function named by its dotted path (property
``callable.path``), for work no other kind does. It receives the job context and may return
counters."""

from __future__ import annotations

from django.utils.module_loading import import_string

from processes.jobs import Counters, JobContext, register


@register("python.callable")
def python_callable(context: JobContext) -> Counters:
    path = context.properties("callable").get("path")
    if not path:
        return {"called": ""}
    result = import_string(path)(context)
    counters = dict(result) if isinstance(result, dict) else {}
    counters.setdefault("called", path)
    return counters
