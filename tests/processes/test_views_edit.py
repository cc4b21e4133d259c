"""The job's edit page: a developer of its team changes the job, its properties and its steps
(through the registry's services, as the API does); what the services refuse is said on the
field at fault and nothing is saved; viewers and outsiders cannot reach it."""

from __future__ import annotations

import pytest

from processes import lifecycle, orchestrator
from processes.models import InstanceExec, Process, Property, grouped_properties
from processes.registry import StepSpec
from tests.helpers.jobs import CALL, EXPORT, SQL, build_job
from tests.helpers.pages import as_shown, client_as, edit_page, section, step_index

pytestmark = pytest.mark.django_db

SLEEP = {"callable": {"path": "tests.processes.callables.sleep"}}
TALK_AND_FAIL = "tests.processes.callables.talk_and_fail"


@pytest.fixture
def job(team) -> Process:
    return build_job(
        team,
        "clicks",
        [
            StepSpec("load", CALL, properties=SLEEP),
            StepSpec("report", CALL, properties=SLEEP),
            StepSpec("daily", SQL, properties={"sql": {"query": "SELECT 1 AS x"}}),
        ],
        properties={"owner": {"email": "data@example.com"}},
    )


def properties_of(process: Process) -> dict:
    return grouped_properties(Property.objects.filter(process=process))


def test_a_developer_edits_a_property_and_a_steps_callable_and_the_next_run_uses_it(team, job):
    client = client_as(team.developer)
    assert f'href="/jobs/{job.pk}/edit/"' in client.get(f"/jobs/{job.pk}/").content.decode()
    data = as_shown(client, job)
    data["properties"] = "owner.email = ops@example.com\nowner.pager = 555"
    data["description"] = "clicks of the day"
    report = step_index(data, job, "report")
    data[f"step-{report}-properties"] = f"callable.path = {TALK_AND_FAIL}\ntest.words = edited"
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{job.pk}/"

    job.refresh_from_db()
    assert job.description == "clicks of the day"
    assert properties_of(job) == {"owner": {"email": "ops@example.com", "pager": "555"}}
    # the step's properties are what was written: its test.sleep-less callable replaced
    assert properties_of(job.steps.get(name="report")) == {
        "callable": {"path": TALK_AND_FAIL},
        "test": {"words": "edited"},
    }
    shown = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "ops@example.com" in shown and "clicks is saved." in shown

    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded and "no good edited" in outcome.error


def test_a_steps_sql_is_edited_over_several_lines(team, job):
    client = client_as(team.developer)
    data = as_shown(client, job)
    daily = step_index(data, job, "daily")
    data[f"step-{daily}-properties"] = (
        "sql.query = SELECT page, count(*) AS views\n  FROM web.clicks\n  GROUP BY page"
    )
    assert client.post(f"/jobs/{job.pk}/edit/", data).status_code == 302
    query = "SELECT page, count(*) AS views\nFROM web.clicks\nGROUP BY page"
    assert properties_of(job.steps.get(name="daily")) == {"sql": {"query": query}}
    # shown again as it was typed, the further lines indented
    again = section(edit_page(client, job).content.decode(), "daily")
    assert "sql.query = SELECT page, count(*) AS views\n  FROM web.clicks" in again


@pytest.mark.parametrize(
    ("step", "properties", "said"),
    [
        ("daily", "sql.query = DROP TABLE web.clicks", "DROP"),
        ("load", "callable.path = os.system", "BDRE_CALLABLES"),
        ("report", f"test.{'k' * 300} = 1", "a key has at most"),
        ("report", "no equals sign", "write group.key = value"),
    ],
)
def test_a_refused_property_is_said_on_its_step_and_nothing_is_saved(
    team, job, step, properties, said
):
    client = client_as(team.developer)
    data = as_shown(client, job)
    data["description"] = "changed too"
    data["properties"] = "owner.email = ops@example.com"
    data[f"step-{step_index(data, job, step)}-properties"] = properties
    before = {p.pk: properties_of(p) for p in [job, *job.steps.all()]}

    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200
    assert said in section(answer.content.decode(), step)
    job.refresh_from_db()
    assert job.description == ""
    assert {p.pk: properties_of(p) for p in [job, *job.steps.all()]} == before


def test_a_refused_job_property_and_a_bad_field_are_said_on_the_job(team, job):
    client = client_as(team.developer)
    data = as_shown(client, job)
    data["properties"] = f"{'g' * 300}.key = 1"
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200
    assert "a config group has at most" in answer.content.decode()
    data = as_shown(client, job)
    data["max_retries"] = 0
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200 and "greater than or equal to 1" in answer.content.decode()
    assert properties_of(job) == {"owner": {"email": "data@example.com"}}


def test_a_step_is_added_and_one_removed_and_the_next_run_follows_them(team, job):
    client = client_as(team.developer)
    data = as_shown(client, job)
    data[f"step-{step_index(data, job, 'report')}-remove"] = "on"
    data[f"step-{step_index(data, job, 'daily')}-remove"] = "on"
    data.update(
        {
            "new-0-name": "publish",
            "new-0-kind": CALL,
            "new-0-after": "load",
            "new-0-properties": "callable.path = tests.processes.callables.sleep",
        }
    )
    assert client.post(f"/jobs/{job.pk}/edit/", data).status_code == 302
    live = list(job.steps.filter(deleted=False).order_by("id").values_list("name", flat=True))
    assert live == ["load", "publish"]
    load = job.steps.get(name="load")
    assert list(load.next_processes.values_list("name", flat=True)) == ["publish"]

    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded
    ran = InstanceExec.objects.filter(parent_id=outcome.instance_exec_id)
    assert sorted(ran.values_list("process__name", flat=True)) == ["load", "publish"]


def test_another_step_row_comes_without_script_and_a_new_step_name_must_be_free(team, job):
    client = client_as(team.developer)
    data = {**as_shown(client, job), "add_step": "1"}
    data.pop("save")
    more = client.post(f"/jobs/{job.pk}/edit/", data)
    assert more.status_code == 200 and 'name="new-1-name"' in more.content.decode()

    data = as_shown(client, job)
    data.update({"new-0-name": "load", "new-0-kind": CALL})
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200 and "already" in answer.content.decode()
    assert job.steps.count() == 3


def test_a_new_step_cannot_reach_another_teams_storage(team, job, settings):
    """A step added on the page is checked as one registered through the API: an export into
    the other team's warehouse folder is refused on the new step's row, and nothing is kept."""
    client = client_as(team.developer)
    data = as_shown(client, job)
    theirs = (settings.BDRE_WAREHOUSE / f"team-{team.other_group.pk}" / "sales").as_uri()
    data.update(
        {
            "new-0-name": "leak",
            "new-0-kind": EXPORT,
            "new-0-properties": f"export.source_table = web.clicks\nexport.format = csv\n"
            f"export.location = {theirs}",
        }
    )
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200
    new_row = answer.content.decode().split('<fieldset class="step new">', 1)[1]
    assert "outside the storage granted to the team" in new_row.split("</fieldset>", 1)[0]
    assert not Process.objects.filter(name="leak").exists()


def test_the_last_step_cannot_be_removed(team, job):
    client = client_as(team.developer)
    data = as_shown(client, job)
    for i in range(3):
        data[f"step-{i}-remove"] = "on"
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200 and "A job needs at least one step" in answer.content.decode()
    assert job.steps.filter(deleted=False).count() == 3


def test_a_running_job_is_edited_but_keeps_its_steps_until_the_run_ends(team, job):
    run = lifecycle.init_job(job.pk).instance_exec_id
    client = client_as(team.developer)
    assert f'Run <a href="/runs/{run}/">{run}</a> of this job is running' in (
        edit_page(client, job).content.decode()
    )
    data = as_shown(client, job)
    data["properties"] = "owner.email = ops@example.com"
    data[f"step-{step_index(data, job, 'report')}-remove"] = "on"
    refused = client.post(f"/jobs/{job.pk}/edit/", data)
    assert refused.status_code == 200
    assert "clicks is running: terminate it first." in refused.content.decode()
    assert properties_of(job) == {"owner": {"email": "data@example.com"}}  # nothing saved

    data.pop(f"step-{step_index(data, job, 'report')}-remove")
    assert client.post(f"/jobs/{job.pk}/edit/", data).status_code == 302
    assert properties_of(job) == {"owner": {"email": "ops@example.com"}}


def test_a_step_of_another_job_cannot_be_posted_in(team, job):
    other = build_job(team, "other", [StepSpec("other_step", CALL, properties=SLEEP)])
    client = client_as(team.developer)
    data = as_shown(client, job)
    data["step-0-step"] = other.steps.get().pk
    data["step-0-remove"] = "on"
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200 and "Select a valid choice" in answer.content.decode()
    assert not other.steps.get().deleted


def test_viewers_and_outsiders_cannot_edit(team, job):
    viewer = client_as(team.viewer)
    assert f"/jobs/{job.pk}/edit/" not in viewer.get(f"/jobs/{job.pk}/").content.decode()
    assert viewer.get(f"/jobs/{job.pk}/edit/").status_code == 403
    data = as_shown(client_as(team.developer), job)
    data["properties"] = "owner.email = taken@example.com"
    assert viewer.post(f"/jobs/{job.pk}/edit/", data).status_code == 403
    outsider = client_as(team.outsider)
    assert outsider.get(f"/jobs/{job.pk}/edit/").status_code == 404
    assert outsider.post(f"/jobs/{job.pk}/edit/", data).status_code == 404
    assert properties_of(job) == {"owner": {"email": "data@example.com"}}


def test_a_tampered_form_is_refused_never_a_500(team, job):
    client = client_as(team.developer)
    data = as_shown(client, job)
    for broken in (
        {**data, "step-TOTAL_FORMS": "x"},
        {**data, "new-TOTAL_FORMS": "x", "add_step": "1"},
        {k: v for k, v in data.items() if not k.startswith("new-")},
        {**data, "max_retries": 10**20, "lease_seconds": -5},
        {**data, "step-0-step": "not a number"},
    ):
        answer = client.post(f"/jobs/{job.pk}/edit/", broken)
        assert answer.status_code == 200, broken
        assert 'class="error"' in answer.content.decode(), broken
    job.refresh_from_db()
    assert (job.max_retries, job.lease_seconds) == (3, 3600)


def test_a_steps_next_steps_and_upstream_jobs_are_edited_on_the_page(team, job, make_job):
    client = client_as(team.developer)
    feeder = make_job("feeder")
    data = as_shown(client, job)
    assert data[f"step-{step_index(data, job, 'load')}-after"] == "report"
    # daily after load, beside report (no longer after report); report reads feeder's batches.
    data[f"step-{step_index(data, job, 'load')}-after"] = "report, daily"
    data[f"step-{step_index(data, job, 'report')}-after"] = ""
    data[f"step-{step_index(data, job, 'report')}-upstream"] = [feeder.pk]
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 302, answer.content.decode()[:3000]
    load, report, daily = (job.steps.get(name=n) for n in ("load", "report", "daily"))
    assert {s.name for s in load.next_processes.all()} == {"report", "daily"}
    assert not report.next_processes.exists()
    assert list(report.enqueuing_processes.all()) == [feeder]
    assert list(job.next_processes.all()) == [load]  # still the first step

    # A cycle is the registry's to refuse: said on the step's field, nothing saved.
    data = as_shown(client, job)
    data[f"step-{step_index(data, job, 'daily')}-after"] = "load"
    refused = client.post(f"/jobs/{job.pk}/edit/", data)
    assert refused.status_code == 200
    assert "cycle" in section(refused.content.decode(), "daily").lower() or "cycle" in (
        refused.content.decode().lower()
    )
    assert not daily.next_processes.exists()


def test_an_upstream_job_of_another_team_is_not_a_choice(team, job):
    other = build_job(
        team.other_application, "theirs", [StepSpec("their_step", CALL, properties=SLEEP)]
    )
    client = client_as(team.developer)
    data = as_shown(client, job)
    data[f"step-{step_index(data, job, 'report')}-upstream"] = [other.pk]
    answer = client.post(f"/jobs/{job.pk}/edit/", data)
    assert answer.status_code == 200
    assert "Select a valid choice" in section(answer.content.decode(), "report")
    assert not job.steps.get(name="report").enqueuing_processes.exists()


def test_the_edit_page_leaves_the_schedule_to_the_schedule(team, job, make_job):
    """The job's upstream trigger and its pause are its schedule's: not lines of the
    properties to edit, and a save of the page keeps them."""
    from processes import schedules

    schedules.set_schedule(job.pk, schedules.Schedule(on_upstream=True))
    schedules.pause(job.pk)
    client = client_as(team.developer)
    data = as_shown(client, job)
    assert "schedule." not in data["properties"]
    assert "schedule" not in edit_page(client, job).content.decode().split("Properties")[1][:200]
    assert client.post(f"/jobs/{job.pk}/edit/", data).status_code == 302
    shown = schedules.schedule_of(job.pk)
    assert shown.on_upstream and shown.paused


def test_an_upstream_job_the_editor_may_not_see_is_kept_when_the_page_saves(team, job):
    from django.contrib.auth.models import Group

    from bdre.models import Membership, Role
    from tests.helpers.factories import UserFactory

    theirs = build_job(
        team.other_application, "theirs", [StepSpec("their_step", CALL, properties=SLEEP)]
    )
    report = job.steps.get(name="report")
    report.enqueuing_processes.add(theirs)  # linked by someone in both teams
    editor = UserFactory(username="only_ours")
    Membership.objects.create(
        user=editor, team=Group.objects.get(pk=team.group.pk), role=Role.DEVELOPER
    )
    client = client_as(editor)
    data = as_shown(client, job)
    data[f"step-{step_index(data, job, 'report')}-description"] = "edited"
    assert client.post(f"/jobs/{job.pk}/edit/", data).status_code == 302
    report.refresh_from_db()
    assert report.description == "edited"
    assert list(report.enqueuing_processes.all()) == [theirs]
