"""The management commands as a shell calls them: JSON out, or the exit status and the error
on stderr."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command


def cli(*args: str) -> object:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def cli_error(*args: str) -> tuple[int, dict]:
    err = io.StringIO()
    with pytest.raises(SystemExit) as excinfo:
        call_command(*args, stderr=err, stdout=io.StringIO())
    return excinfo.value.code, json.loads(err.getvalue())
