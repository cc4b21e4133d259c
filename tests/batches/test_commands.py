"""The batches' commands (register_file, requeue, discard) from the command line: JSON out,
and on a BdreError the code and message on stderr with the code as the exit status. scan_files is
in ingest/test_commands.py."""

from __future__ import annotations

import pytest

from batches.models import BatchConsumpQueue, BatchState
from tests.helpers.commands import cli, cli_error
from tests.helpers.lifecycle import landed

pytestmark = pytest.mark.django_db


def test_term_requeue_and_discard_from_the_command_line(make_job):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest], max_retries=1)
    cli(
        "register_file", "--source-process-id", str(ingest.pk), "--path", landed(ingest, "x"),
        "--file-size", "1", "--file-hash", "h",
    )  # fmt: skip
    cli("init_job", "--process-id", str(load.pk), "--max-batch", "1")
    cli("term_job", "--process-id", str(load.pk), "--error", "bad")
    row = BatchConsumpQueue.objects.get()
    assert row.batch_state_id == BatchState.DISCARDED
    # Back on the batch its run failed to build, for the next run to rebuild it.
    assert cli("requeue", "--queue-id", str(row.pk))["batch_state"] == BatchState.FAILED
    discarded = cli("discard", "--queue-id", str(row.pk), "--reason", "wrong file")
    assert discarded["batch_state"] == BatchState.DISCARDED
    assert cli_error("requeue", "--queue-id", "999999")[1]["code"] == 117
