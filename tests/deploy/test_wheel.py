"""The package is whole: the wheel built from the project holds every file of its packages
(templates, static files and migrations included), and BDRE run from that wheel alone, away
from the source tree, serves its pages and their static files.

The wheel is built offline, without build isolation, from a copy of the project (so that the
build leaves nothing behind in the work tree and nothing left there by an earlier build gets
in): setuptools, a test dependency, is all it needs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.helpers.project import ROOT, packages

# Never part of the package: what builds, runs, tests and version control leave in the tree.
LEFT_BEHIND = {".git", ".venv", "var", "build", "dist", ".hypothesis", ".pytest_cache"}
LEFT_BEHIND |= {".ruff_cache", ".mypy_cache", "node_modules", "__pycache__"}
# Only this project, with the setuptools already installed: no index, no network.
OFFLINE = ["--no-deps", "--no-build-isolation", "--no-index"]


def left_behind(name: str) -> bool:
    return name in LEFT_BEHIND or name.endswith((".egg-info", ".pyc"))


def project_files(top: Path) -> set[str]:
    """The files under ``top``, as paths relative to the project, without what is left behind."""
    found = set()
    for folder, subfolders, files in os.walk(top):
        subfolders[:] = [d for d in subfolders if not left_behind(d)]
        found |= {
            (Path(folder) / f).relative_to(ROOT).as_posix() for f in files if not left_behind(f)
        }
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(
        ROOT,
        source,
        dirs_exist_ok=True,
        ignore=lambda folder, names: [n for n in names if left_behind(n)],
    )
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", *OFFLINE, "--quiet", "-w", str(out), str(source)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("bdre-*.whl")
    return built


@pytest.fixture(scope="module")
def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_holds_every_template_and_static_file(names: set[str]):
    """Every file under a templates/ or static/ folder anywhere in the project, not only in
    the packages (a folder left outside them would be missing from an installation). The
    project's pages are in the top-level templates/ (the layout DESIGN.md asks for); the
    package reaches them through its bdre/templates link, and the wheel holds them there."""
    assert (ROOT / "bdre" / "templates").resolve() == ROOT / "templates"
    pages = {
        "bdre/" + f if f.startswith("templates/") else f
        for f in project_files(ROOT)
        if not f.startswith(("tests/", "docs/", "bench/"))
        and {"templates", "static"} & set(f.split("/")[:-1])
    }
    assert "bdre/templates/registration/login.html" in pages
    assert "bdre/templates/base.html" in pages
    assert "bdre/static/bdre/ui.css" in pages
    assert sorted(pages - names) == []


def test_the_wheel_holds_every_file_of_every_package(names: set[str]):
    """Code, migrations and whatever else an app reads at run time."""
    assert packages() == ["alerts", "batches", "bdre", "lineage", "processes"]
    for package in packages():
        files = project_files(ROOT / package)
        assert f"{package}/migrations/0001_initial.py" in files
        assert sorted(files - names) == [], package


def test_the_wheel_alone_serves_the_pages_and_their_static_files(wheel: Path, tmp_path: Path):
    """The wheel unpacked as an installation would put it, and nothing of the work tree on
    the path: Django renders the login page, finds the stylesheet, migrates a new database,
    and serves the login page, its stylesheet and the not-found page."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    script = textwrap.dedent(
        """
        import json, os, sys
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != ROOT]
        import django
        django.setup()
        from django.contrib.staticfiles import finders
        from django.core.management import call_command
        from django.template.loader import get_template
        from django.test import Client

        import batches, bdre, lineage, processes
        login = get_template("registration/login.html")
        call_command("migrate", verbosity=0)
        client = Client(HTTP_HOST="localhost")
        page = client.get("/accounts/login/")
        css = client.get("/static/bdre/ui.css")
        missing = client.get("/no-such-page/")
        print(json.dumps({
            "modules": [m.__file__ for m in (batches, bdre, lineage, processes)],
            "template": login.origin.name,
            "rendered": login.render({}),
            "static": finders.find("bdre/ui.css"),
            "page": [page.status_code, page.content.decode()],
            "css": [css.status_code, b"".join(css.streaming_content).decode()],
            "missing": [missing.status_code, missing.content.decode()],
        }))
        """
    ).replace("ROOT", repr(str(ROOT)))
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DATABASE_URL"}}
    env |= {
        "PYTHONPATH": str(site),
        "DJANGO_SETTINGS_MODULE": "bdre.settings",
        "BDRE_VAR_DIR": str(tmp_path / "var"),
        "DEBUG": "true",
    }
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout.splitlines()[-1])

    for module in answer["modules"]:
        assert Path(module).is_relative_to(site), module
    assert Path(answer["template"]) == site / "bdre/templates/registration/login.html"
    assert "<h1>Log in</h1>" in answer["rendered"]
    assert Path(answer["static"]) == site / "bdre/static/bdre/ui.css"

    status, page = answer["page"]
    assert status == 200
    assert "<h1>Log in</h1>" in page and 'href="/static/bdre/ui.css"' in page
    status, css = answer["css"]
    assert status == 200
    assert css == (ROOT / "bdre/static/bdre/ui.css").read_text()
    status, missing = answer["missing"]
    assert status == 404
    assert "· BDRE</title>" in missing
