"""Nothing the web process or a worker imports at start-up imports PySpark (DESIGN.md
section 2), nor the Spark session module: Spark is loaded by the Spark step kinds' bodies
only, when they first run. Every kind's spec (what the registry checks a step with) is
loaded without it. Nor, with OpenLineage off (the default), its client: it is imported when
an event is sent (lineage/announce.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_start_up_modules_do_not_import_pyspark_nor_the_openlineage_client():
    script = (
        "import django, sys\n"
        "django.setup()\n"
        "import bdre.urls, bdre.celery, processes.admin, processes.orchestrator, "
        "processes.step_kinds, processes.registry, processes.step_kinds.checks, batches.admin, "
        "batches.ingest.scan, lineage.admin\n"
        "import importlib\n"
        "from processes import step_kinds\n"
        "seeded = importlib.import_module('processes.migrations.0002_seed_master_data')\n"
        "kinds = {kind for *_, kind, _ in seeded.PROCESS_TYPES if kind}\n"
        "assert len(kinds) == 7 and all(step_kinds.spec_of(kind).run for kind in kinds)\n"
        "loaded = ('pyspark', 'processes.step_kinds.spark_session', 'openlineage.client')\n"
        "print(sorted(m for m in loaded if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"DJANGO_SETTINGS_MODULE": "bdre.settings", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
