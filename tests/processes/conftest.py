from __future__ import annotations

import pytest

from tests.helpers.workers import Worker, purge_broker, worker_env

# --- jobs run by real Celery workers (test_tasks.py, test_orchestrator.py) -----------------


@pytest.fixture
def worker(tmp_path, settings):
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    purge_broker()
    workers: list[Worker] = []

    def start(**env: str) -> Worker:
        w = Worker(tmp_path / f"worker{len(workers)}.log", worker_env(tmp_path, **env)).start()
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.stop()
