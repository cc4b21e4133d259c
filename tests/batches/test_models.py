"""Constraints on the queue and on files (run on SQLite and on PostgreSQL)."""

from __future__ import annotations

import pytest

from batches.models import File
from tests.helpers.database import rejected
from tests.helpers.factories import (
    BatchFactory,
    FileFactory,
    QueueRowFactory,
    ServerFactory,
    TeamFactory,
)

# backends: constraints (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


def test_a_file_is_registered_once_per_team_server_path_and_hash():
    server = ServerFactory()
    team = server.team
    FileFactory(team=team, server=server, path="s3://b/1.txt", file_hash="etag1")
    assert rejected(
        lambda: FileFactory(team=team, server=server, path="s3://b/1.txt", file_hash="etag1")
    )
    # Another team granted the same server registers it for itself.
    FileFactory(team=TeamFactory(), server=server, path="s3://b/1.txt", file_hash="etag1")


def test_a_local_file_without_server_is_registered_once_too():
    # NULL server: a plain unique index would treat every NULL as distinct.
    team = TeamFactory()
    FileFactory(team=team, server=None, path="/landing/1.txt", file_hash="md5a")
    assert rejected(
        lambda: FileFactory(team=team, server=None, path="/landing/1.txt", file_hash="md5a")
    )


def test_an_overwritten_file_with_a_new_hash_may_be_registered_again():
    server = ServerFactory()
    FileFactory(server=server, path="s3://b/1.txt", file_hash="etag1")
    FileFactory(server=server, path="s3://b/1.txt", file_hash="etag2")
    FileFactory(server=None, path="s3://b/1.txt", file_hash="etag1")
    FileFactory(server=ServerFactory(), path="s3://b/1.txt", file_hash="etag1")
    assert File.objects.filter(path="s3://b/1.txt").count() == 4


def test_negative_file_size_is_rejected():
    assert rejected(lambda: FileFactory(file_size=-1))


def test_a_batch_is_queued_once_per_consuming_step():
    row = QueueRowFactory()
    assert rejected(lambda: QueueRowFactory(process=row.process, source_batch=row.source_batch))
    QueueRowFactory(source_batch=row.source_batch)  # another step may consume it


def test_batches_get_increasing_ids_after_the_seed():
    first, second = BatchFactory(), BatchFactory()
    assert 0 < first.pk < second.pk
