from __future__ import annotations

import pytest

from bdre.errors import HTTP_STATUS, MESSAGES, BdreError, Code


def test_every_code_from_101_to_116_has_a_message_and_a_status():
    assert [int(c) for c in Code] == list(range(101, 117))
    assert set(MESSAGES) == set(Code) == set(HTTP_STATUS)


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
