"""The SQLite test database, copied from one that the same migrations made before.

Migrating a new SQLite test database costs a test process about 10 CPU-s on the 2-core
machine (`manage.py migrate` on an empty file, against 2 s for one with nothing left to
apply), in every run of `make test-fast` and `make test`. The first process that migrates
keeps a copy of the database just after it, named by a digest of every migration's file and
Django's version; a later process, in this run or the next, starts from a copy of it. Django
then migrates it as it would a kept database (`--reuse-db`): nothing is left to apply, and
what `post_migrate` adds (content types, permissions) is added again if missing. A migration
added, changed or removed is another digest, so a new migration always runs.

``python -m tests.helpers.migrated`` (``make test-database``, which `make test` and `make
test-fast` run first) makes the copy before the test processes start, which would otherwise
each migrate at once. Only on SQLite, and not with `--nomigrations`: on PostgreSQL each test
process migrates its own."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from pathlib import Path

import django
from django.conf import settings
from django.db import connections


def _folder() -> Path:
    # One for all of a run's test processes (tests/var_dir.py gives each a var folder of its
    # own below the shared one).
    return Path(os.environ.get("BDRE_TEST_SHARED_VAR_DIR") or settings.VAR_DIR)


def _digest() -> str:
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    digest = hashlib.sha256(django.get_version().encode())
    for key in sorted(loader.disk_migrations):
        module = sys.modules[loader.disk_migrations[key].__module__]
        digest.update(repr(key).encode())
        digest.update(Path(module.__file__ or "").read_bytes())
    return digest.hexdigest()[:16]


def template() -> Path | None:
    """Where the migrated copy for these migrations is (or will be); None off SQLite."""
    connection = connections["default"]
    if connection.vendor != "sqlite":
        return None
    return _folder() / f"test-migrated-{_digest()}.sqlite3"


def _test_database() -> Path:
    return Path(connections["default"].creation._get_test_db_name())


def _files(database: Path) -> tuple[Path, ...]:
    return tuple(Path(f"{database}{suffix}") for suffix in ("", "-journal", "-wal", "-shm"))


def _remove(database: Path) -> None:
    for path in _files(database):
        path.unlink(missing_ok=True)


# What SQLite says of a file that is no database, or a damaged one: a template written over,
# or left empty by a process killed while writing it.
_NOT_A_DATABASE = {"SQLITE_NOTADB", "SQLITE_CORRUPT"}


def start_from_copy() -> bool:
    """Put a copy of the migrated database where this process's test database goes, if
    there is one: then Django is to keep it, not make it anew."""
    source = template()
    if source is None or not source.exists():
        return False
    target = _test_database()
    target.parent.mkdir(parents=True, exist_ok=True)
    # A journal left by a killed run would be applied to the new file.
    _remove(target)
    try:
        _copy(source, target)
    except sqlite3.DatabaseError as error:
        if getattr(error, "sqlite_errorname", None) not in _NOT_A_DATABASE:
            raise
        corrupt = True
    else:
        # An empty file is a valid, empty database to SQLite.
        corrupt = not _applied(target)
    if corrupt:
        # Made anew, and kept again by the first process that migrates.
        _remove(source)
        _remove(target)
        return False
    return True


def keep_copy() -> None:
    """Keep a copy of this process's test database, just migrated: each table empty but for
    the migrations' own rows. Written aside and renamed, so that a process starting meanwhile
    finds a whole copy or none."""
    _publish(_test_database())


def _publish(migrated: Path) -> None:
    target = template()
    if target is None or target.exists():
        return
    if not _applied(migrated):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}")
    try:
        _copy(migrated, partial)
        partial.replace(target)
    finally:
        _remove(partial)


def forget_copied() -> None:
    """The test database made from a copy is one Django keeps: removed at the end, as Django
    removes one it made."""
    connections.close_all()
    _remove(_test_database())


def _applied(database: Path) -> bool:
    # A database that no migration made (`--nomigrations`, or one whose migrate was cut off
    # before its first migration was recorded) is no template.
    connection = _read_only(database)
    try:
        return bool(connection.execute("SELECT count(*) FROM django_migrations").fetchone()[0])
    except sqlite3.DatabaseError:
        return False
    finally:
        connection.close()


def _read_only(database: Path) -> sqlite3.Connection:
    # Read-only, so that a file removed meanwhile is an error, not a new empty database.
    return sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)


def _copy(source: Path, target: Path) -> None:
    # SQLite's backup, not a file copy: a test database kept as the template is in WAL mode,
    # and what a copy of its file alone would miss may still be in its journal. The copy is
    # one file (journal mode DELETE) that nothing writes to: the template is read by many
    # processes, and a test database made from it is set to WAL again by its first
    # connection (bdre/settings.py).
    with _read_only(source) as reading, sqlite3.connect(target) as writing:
        reading.backup(writing)
        writing.execute("PRAGMA journal_mode=DELETE")
    reading.close()
    writing.close()


def main() -> None:
    """Migrate a new test database into the copy, unless the copy is there."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bdre.settings")
    django.setup()
    target = template()
    if target is None or target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    migrated = target.with_name(f"{target.name}.migrating.{os.getpid()}")
    connection = connections["default"]
    connection.settings_dict["TEST"] = {
        **connection.settings_dict.get("TEST", {}),
        "NAME": str(migrated),
    }
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        connections.close_all()
        _publish(migrated)
    finally:
        _remove(migrated)
    if target.exists():
        print(target)


if __name__ == "__main__":
    main()
