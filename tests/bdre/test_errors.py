from __future__ import annotations

import re
from pathlib import Path

import pytest

from bdre.errors import HTTP_STATUS, MESSAGES, BdreError, Code


def test_every_code_from_101_to_121_has_a_message_and_a_status():
    assert [int(c) for c in Code] == list(range(101, 122))
    assert set(MESSAGES) == set(Code) == set(HTTP_STATUS)


def test_docs_api_lists_every_code_with_its_status():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    listed = {
        int(c): int(s) for c, s in re.findall(r"^\| (1[0-9]{2}) \| ([0-9]{3}) \|", docs, re.M)
    }
    assert listed == {int(code): status for code, status in HTTP_STATUS.items()}


def test_no_service_sets_an_http_status_of_its_own():
    # A code's status is the catalogue's: BdreError takes none at the call site.
    with pytest.raises(TypeError):
        BdreError(Code.NO_BATCHES, "x", http_status=400)  # type: ignore[call-arg]


def test_error_carries_code_message_and_details():
    error = BdreError(104, "process 7")
    assert error.code == Code.PARENT_ALREADY_RUNNING
    assert error.message == "Parent Process is already running: process 7"
    assert error.http_status == 409
    assert error.as_dict() == {"code": 104, "message": error.message}
    assert str(error) == "104 Parent Process is already running: process 7"


@pytest.mark.parametrize("code,status", [(102, 404), (103, 404), (101, 400), (110, 409)])
def test_unknown_ids_are_404_conflicts_409_bad_input_400(code, status):
    assert BdreError(code).http_status == status


def test_an_unknown_code_is_refused():
    with pytest.raises(ValueError):
        BdreError(999)
