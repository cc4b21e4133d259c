"""Processes as Linux's /proc tells them, for the test plugins (tests/terminate.py,
tests/cpu_report.py)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def children(pid: int) -> list[int]:
    """The process's children, from ``/proc/PID/task/TID/children``: none for a process that
    ended meanwhile, or on a kernel without those files."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            found += [int(child) for child in Path(task.path, "children").read_text().split()]
    return found
