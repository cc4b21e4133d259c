"""What a test needs of the machine beyond Python and the test database (Chromium, the S3A
jars, the PostgreSQL JDBC driver, PostgreSQL): a skip where it may be missing, a failure
where everything is required."""

from __future__ import annotations

import os

import pytest

# CI sets it (.ci/run): a test that needs something of the machine (the S3A jars, Chromium,
# the PostgreSQL JDBC driver) fails there when it is missing instead of skipping, so that a
# set-up that broke is a red run, not a run with fewer tests.
REQUIRE_ALL = os.environ.get("BDRE_TEST_REQUIRE_ALL", "") not in ("", "0", "false")


# How the skip of a test that needs a part of the machine begins: the cluster tests, which
# count any other skip as a failure, accept these (tests/cluster/test_pipelines.py).
MACHINE_PART_MISSING = "this machine lacks what the test needs"


def skip_unless_required(reason: str) -> None:
    """Skip the test for ``reason``, a part of the machine it needs that is missing, or
    fail it where everything is required (CI)."""
    if REQUIRE_ALL:
        pytest.fail(f"required by BDRE_TEST_REQUIRE_ALL: {reason}", pytrace=False)
    pytest.skip(f"{MACHINE_PART_MISSING}: {reason}")
