"""Nothing the web process or a worker imports at start-up imports PySpark (DESIGN.md
section 2), nor the Spark session module: Spark is loaded by the Spark step kinds only, on
first use. The registry checks a step's Spark options with ``spark_conf``, pure Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_start_up_modules_do_not_import_pyspark():
    script = (
        "import django, sys\n"
        "django.setup()\n"
        "import bdre.urls, bdre.celery, processes.admin, processes.orchestrator, "
        "processes.jobs, processes.registry, processes.jobs.checks, batches.admin, "
        "batches.ingest.scan, lineage.admin\n"
        "from processes import jobs\n"
        "jobs.get('ingest.scan'); jobs.get('python.callable')\n"
        "print(sorted(m for m in ('pyspark', 'processes.jobs.spark_session') "
        "if m in sys.modules))\n"
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
