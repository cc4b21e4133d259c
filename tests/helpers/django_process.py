"""Django in a fresh interpreter, with only the environment a test gives it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUR_VARIABLES = {
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "SPARK_MASTER",
    "SPARK_REMOTE",
    "SPARK_CONF",
    "BDRE_WAREHOUSE",
    "BDRE_VAR_DIR",
    "FIELD_ENCRYPTION_KEY",
    "TIME_ZONE",
}


def run_django(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` after django.setup() in a fresh interpreter with only ``env`` set."""
    clean = {k: v for k, v in os.environ.items() if k not in OUR_VARIABLES}
    clean.update(env, DJANGO_SETTINGS_MODULE="bdre.settings")
    script = "import django, json\ndjango.setup()\n" + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=clean, capture_output=True, text=True
    )
