"""Real parallel processes on the test database."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable

from django.db import connections

FORK = multiprocessing.get_context("fork")


def in_children(target: Callable, args_list: list[tuple]) -> list:
    """Run ``target(*args)`` in one forked process per args, return their results in order."""
    connections.close_all()
    with FORK.Pool(len(args_list)) as pool:
        return pool.starmap(target, args_list)
