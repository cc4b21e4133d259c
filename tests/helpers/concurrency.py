"""Real parallel processes on the test database."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from bdre.errors import BdreError

FORK = multiprocessing.get_context("fork")

# How long a child waits at the barrier for its siblings: one that never gets there (it died,
# or raised first) breaks the barrier for the others then, and the test fails.
START_TIMEOUT_SECONDS = 120

# Set in the parent before the pool forks, so that every child inherits it (a barrier cannot
# be pickled into a pool's task, only shared by inheritance).
_start: threading.Barrier | None = None


def _at_once(target: Callable, args: tuple) -> Any:
    """``target(*args)`` on a connection of this child's own, once every sibling is ready to
    make its call too: they contend at the same moment, not in the order they were forked."""
    assert _start is not None
    connections.close_all()
    try:
        _start.wait(START_TIMEOUT_SECONDS)
        return target(*args)
    finally:
        connections.close_all()


def in_children(target: Callable, args_list: list[tuple]) -> list:
    """Run ``target(*args)`` in one forked process per args, all at once, and return their
    results in order. ``target`` is a module's function (the pool names it to the child)."""
    global _start
    connections.close_all()
    _start = FORK.Barrier(len(args_list))
    try:
        # One task a process: a child blocked at the barrier takes no second task, so each of
        # the pool's processes holds exactly one when the barrier opens.
        with FORK.Pool(len(args_list)) as pool:
            return pool.starmap(_at_once, [(target, args) for args in args_list], chunksize=1)
    finally:
        _start = None


def run_or_code(call: Callable[[], Any]) -> tuple[str, int]:
    """``("run", id)`` for the id of the run ``call`` started, ``("code", code)`` for the
    ``BdreError`` that refused it. Two tags, not one number: run 104 is not error 104."""
    try:
        return ("run", call().instance_exec_id)
    except BdreError as error:
        return ("code", int(error.code))
