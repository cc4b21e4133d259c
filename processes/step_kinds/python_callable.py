"""``python.callable``: call a function named by its dotted path (property
``callable.path``), for work no other kind does. It receives the job context and may return
counters.

The path is a team developer's input and the function runs on a worker that can read every
team's data, so only functions under the prefixes an installation admin allows
(``BDRE_CALLABLES``, docs/security.md) are called. :func:`resolve` is the one check, made at
registration (``processes.registry``: a 400 on the property) and again when the step runs,
since a property can change behind the registry's back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from processes.step_kinds import (
    Counters,
    Prop,
    RefusedProperty,
    StepContext,
    StepKind,
    check_value,
    register,
)

DOTTED_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+\Z")


class RefusedCallable(RefusedProperty):
    """A ``callable.path`` that is not run; the message says why."""

    log_id = "callable.refused"


def is_allowed(path: str, prefixes: Sequence[str]) -> bool:
    """Whether ``path`` is one of ``prefixes`` or under one, by whole dotted segments (``os``
    does not allow ``ossify``)."""
    return any(path == prefix or path.startswith(prefix + ".") for prefix in prefixes if prefix)


def resolve(path: str, prefixes: Sequence[str] | None = None) -> Callable[..., Any]:
    """The function ``path`` names, or :class:`RefusedCallable`: outside the allowed prefixes,
    not importable, not callable, or defined elsewhere and only imported under a prefix (a
    module that does ``from os import system`` must not allow ``module.system``)."""
    prefixes = list(settings.BDRE_CALLABLES if prefixes is None else prefixes)
    allowed = ", ".join(prefixes) or "none"
    if not DOTTED_PATH.match(path) or not is_allowed(path, prefixes):
        # Checked before importing: importing a module runs its code.
        raise RefusedCallable(
            f"callable {path!r} is not allowed: an installation admin allows the dotted "
            f"paths under {allowed} (BDRE_CALLABLES)"
        )
    try:
        function: object = import_string(path)
    except Exception as exc:
        raise RefusedCallable(f"callable {path!r} cannot be imported: {exc}") from exc
    if not callable(function):
        raise RefusedCallable(f"callable {path!r} is not callable")
    if not is_allowed(getattr(function, "__module__", None) or "", prefixes):
        raise RefusedCallable(
            f"callable {path!r} is defined in {function.__module__}, outside {allowed} "
            "(BDRE_CALLABLES)"
        )
    return function


class SparkConnectUnsupported(RuntimeError):
    """A callable used what a Spark Connect session lacks (``sparkContext``, ``_jvm``)."""


def needs_jvm(exc: BaseException) -> str | None:
    """The JVM attribute a Spark Connect session refused (``sparkContext``), if that is what
    ``exc`` is; found without importing PySpark."""
    condition = getattr(exc, "getCondition", None)
    if not callable(condition) or condition() != "JVM_ATTRIBUTE_NOT_SUPPORTED":
        return None
    parameters = getattr(exc, "getMessageParameters", lambda: None)() or {}
    return f"`{parameters.get('attr_name', 'a JVM attribute')}`"


def python_callable(context: StepContext) -> Counters:
    path = context.properties("callable").get("path")
    if not path:
        # No path at all is a placeholder step (the benchmarks, a job being built): nothing is
        # called, and the run's counters say so. A path that names nothing is an error below.
        return {"called": ""}
    function = resolve(path)  # refused before the run already (checks.check_step_run)
    try:
        result = function(context)
    except Exception as exc:
        missing = needs_jvm(exc)
        if missing is None:
            raise
        message = (
            f"callable {path!r} uses {missing}, which a Spark Connect session (SPARK_REMOTE) "
            "does not have: it depends on the JVM of a driver in the worker. Use the "
            "DataFrame and SQL API of get_spark()'s session, or run the worker without "
            "SPARK_REMOTE"
        )
        context.log("callable.connect", message, category="error")
        raise SparkConnectUnsupported(message) from exc
    counters = dict(result) if isinstance(result, dict) else {}
    counters.setdefault("called", path)
    return counters


KIND = register(
    StepKind(
        "python.callable",
        python_callable,
        properties={
            "callable": {
                "path": Prop(
                    help="the function's dotted path, under BDRE_CALLABLES; none: "
                    "a placeholder step that calls nothing"
                ),
            }
        },
        checks=(check_value("callable", "path", resolve),),
    )
)
