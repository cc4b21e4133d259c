"""The batches page: a team's batches with their run, files and waiting steps, filtered; an
outsider sees none of them."""

from __future__ import annotations

import re

import pytest

from batches.models import BatchState
from tests.helpers.factories import BatchFactory, FileFactory, QueueRowFactory, StepFactory
from tests.helpers.pages import client_as

pytestmark = pytest.mark.django_db


def listed(page: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<td><a href="/batches/(\d+)/">', page)]


def batch_files(batch) -> list[str]:
    return sorted(batch.files.values_list("path", flat=True))


@pytest.fixture
def registered(team):
    """A registered batch of two files, waiting for one step of the team and done by
    another; a step of another team waits for it too."""
    batch = BatchFactory(bus_domain=team.application, batch_type="file")
    FileFactory(batch=batch, file_size=1024)
    FileFactory(batch=batch, file_size=2048)
    waiting = StepFactory(bus_domain=team.application)
    done = StepFactory(bus_domain=team.application)
    QueueRowFactory(process=waiting, source_batch=batch)
    QueueRowFactory(process=done, source_batch=batch, batch_state_id=BatchState.PROCESSED)
    QueueRowFactory(process=StepFactory(bus_domain=team.other_application), source_batch=batch)
    return batch


def test_members_see_their_batches_with_run_files_and_waiting_steps(team, pipeline, registered):
    job, outcome = pipeline
    page = client_as(team.viewer).get("/batches/").content.decode()
    assert listed(page) == [registered.pk, outcome.target_batch_id]  # newest first
    row = page.split(f'<a href="/batches/{registered.pk}/">')[1].split("</tr>")[0]
    assert "registered" in row and "3.0\xa0KB" in row
    first = batch_files(registered)[0]
    assert f'<span title="{first}">{first.rsplit("/", 1)[-1]}</span> and 1 more' in row
    assert "1 step<" in row  # not the processed row, nor the other team's step
    made = page.split(f'<a href="/batches/{outcome.target_batch_id}/">')[1].split("</tr>")[0]
    assert f'href="/jobs/{job.pk}/">clicks</a>' in made
    assert f'href="/runs/{outcome.instance_exec_id}/"' in made


def test_batches_are_filtered_by_job_type_and_date(team, pipeline, registered):
    job, outcome = pipeline
    client = client_as(team.viewer)
    by_job = client.get(f"/batches/?source_process={job.pk}").content.decode()
    assert listed(by_job) == [outcome.target_batch_id]
    assert f'<option value="{job.pk}" selected>' in by_job
    assert listed(client.get("/batches/?batch_type=file").content.decode()) == [registered.pk]
    assert listed(client.get("/batches/?created_before=2000-01-01").content.decode()) == []


def test_an_outsider_sees_no_batch_of_the_team(team, pipeline, registered):
    page = client_as(team.outsider).get("/batches/").content.decode()
    assert listed(page) == [] and "No batch matches." in page
    assert "clicks" not in page  # nor the team's jobs in the filter


@pytest.mark.parametrize(
    "query",
    [
        "created_after=yesterday",
        "source_process=abc",
        "source_process=99999999999999999999",
        "application=-99999999999999999999",
        "page=999",
        "batch_type=%00",
    ],
)
def test_odd_filters_are_answered_not_crashed(team, pipeline, query):
    answer = client_as(team.viewer).get(f"/batches/?{query}")
    assert answer.status_code == 200


def test_anonymous_users_are_sent_to_log_in(client):
    answer = client.get("/batches/")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
