"""The project as its packaging says it is: the top-level packages pyproject.toml puts in
the wheel, which the image (tests/deploy/test_compose.py) and the wheel
(tests/deploy/test_wheel.py) must both hold."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def packages() -> list[str]:
    """The top-level packages that pyproject.toml says the wheel holds."""
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(
        p.name
        for p in ROOT.iterdir()
        if (p / "__init__.py").exists() and any(fnmatch.fnmatch(p.name, i) for i in include)
    )
