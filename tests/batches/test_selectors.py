"""What the batches' pages and API read for a user (batches/selectors.py): the one rule of
which queue rows he may act on, which the page's and the API's bulk actions share."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from batches import selectors
from tests.helpers.factories import FileFactory, QueueRowFactory, StepFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(team):
    ours = StepFactory(bus_domain=team.application)
    theirs = StepFactory(bus_domain=team.other_application)
    return (
        QueueRowFactory(process=ours),
        QueueRowFactory(process=ours),
        QueueRowFactory(process=theirs),
    )


def test_a_developer_acts_on_his_teams_rows_in_the_order_given_once_each(team, rows):
    a, b, theirs = rows
    assert selectors.acting_on(team.developer, [b.pk, a.pk, b.pk, theirs.pk, 10**9]) == [
        b.pk,
        a.pk,
    ]
    assert selectors.acting_on(team.admin, [a.pk]) == [a.pk]


def test_a_viewer_who_sees_a_row_is_refused_the_whole_request(team, rows):
    a, _, _ = rows
    with pytest.raises(PermissionDenied):
        selectors.acting_on(team.viewer, [a.pk])


def test_another_teams_rows_are_as_if_they_did_not_exist(team, rows):
    a, b, theirs = rows
    assert selectors.acting_on(team.outsider, [a.pk, b.pk]) == []
    assert selectors.acting_on(team.outsider, [theirs.pk]) == [theirs.pk]
    assert {r.pk for r in selectors.queue_rows(team.outsider)} == {theirs.pk}


def test_a_batch_counts_its_files_and_the_users_waiting_steps_only(team, rows):
    a, _, _ = rows
    FileFactory(batch=a.source_batch, file_size=10)
    FileFactory(batch=a.source_batch, file_size=5)
    # Another team's step waits on the same batch: not the developer's to count.
    QueueRowFactory(
        process=StepFactory(bus_domain=team.other_application), source_batch=a.source_batch
    )
    batch = selectors.batches(team.developer).get(pk=a.source_batch_id)
    assert (batch.file_count, batch.file_bytes, batch.waiting) == (2, 15, 1)
