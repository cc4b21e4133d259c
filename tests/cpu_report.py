"""The CPU each test takes, with the processes it starts: ``-p tests.cpu_report
--cpu-report=FOLDER`` writes one JSON line a test (set-up, call and teardown together) to a
file of each test process in FOLDER; ``python -m tests.cpu_report FOLDER`` sums them by
module and lists the costliest tests.

``--durations`` gives wall time, which on 2 cores shared by five test processes (CI) says more
about what ran beside a test than about the test. CPU is what the suite is short of. A test's
CPU here is its process's, plus its living descendants' (read from ``/proc`` before and after
it: a Spark session's JVM, a worker, a demo), plus what the process's children that ended
took (with their own children that they waited for). A daemon that leaves its parent (Spark's
standalone master and worker, and so their executors) is counted by no test: the report is a
floor for the cluster's tests."""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.helpers.proc import children

_TICKS = os.sysconf("SC_CLK_TCK")


def _descendants_cpu() -> float:
    total, stack = 0.0, children(os.getpid())
    while stack:
        pid = stack.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # ended meanwhile
            continue
        # After the command's parenthesis: state, ppid, ... utime (12th), stime (13th).
        fields = stat[stat.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / _TICKS
        stack += children(pid)
    return total


def _cpu() -> tuple[float, float]:
    """This process's CPU, and that of its descendants, living or waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = own.ru_utime + own.ru_stime
    return mine, mine + ended.ru_utime + ended.ru_stime + _descendants_cpu()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        metavar="FOLDER",
        help="write the CPU each test takes, with the processes it starts, to FOLDER",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator:
    folder = item.config.getoption("cpu_report")
    if not folder:
        return (yield)
    own_before, all_before = _cpu()
    started = time.monotonic()
    result = yield
    own_after, all_after = _cpu()
    line = {
        "test": item.nodeid,
        "cpu": round(all_after - all_before, 2),
        "own": round(own_after - own_before, 2),
        "wall": round(time.monotonic() - started, 2),
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    with Path(folder, f"cpu-{os.getpid()}.jsonl").open("a") as out:
        out.write(json.dumps(line) + "\n")
    return result


def main(folder: str, top: int = 30) -> None:
    tests = [json.loads(line) for path in Path(folder).glob("cpu-*.jsonl") for line in path.open()]
    modules: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for test in tests:
        module = modules[test["test"].split("::")[0]]
        module[0] += test["cpu"]
        module[1] += test["wall"]
        module[2] += 1
    print(f"{len(tests)} tests, {sum(t['cpu'] for t in tests):.0f} CPU-s")
    print(f"{'CPU-s':>8} {'wall s':>8} {'tests':>6}  module")
    for name, (cpu, wall, count) in sorted(modules.items(), key=lambda m: -m[1][0])[:top]:
        print(f"{cpu:8.1f} {wall:8.1f} {count:6d}  {name}")
    print(f"{'CPU-s':>8} {'own':>8} {'wall s':>8}  test")
    for test in sorted(tests, key=lambda t: -t["cpu"])[:top]:
        print(f"{test['cpu']:8.1f} {test['own']:8.1f} {test['wall']:8.1f}  {test['test']}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(n) for n in sys.argv[2:3]))
