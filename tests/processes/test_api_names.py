"""Names are per team (issue 18, DESIGN.md section 9: "'already exists' answers never reveal
another team's names"). Each test is the attack: a developer of another team (the outsider)
names his application, job, steps or server exactly like the first team's. It must simply
work, as if the first team's did not exist; a duplicate inside one's own team is still a 400
that names one's own object only. Through the REST API, the registration pages and the
command line."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.test import Client

from bdre.models import Role
from lineage import openlineage
from processes import registry
from processes.models import BusDomain, Process, Server
from tests.helpers.api import api_as
from tests.helpers.concurrency import in_children
from tests.helpers.factories import (
    BusDomainFactory,
    InstanceExecFactory,
    JobFactory,
    MembershipFactory,
    ServerFactory,
    UserFactory,
)
from tests.helpers.jobs import JOB_TYPE, STEP_TYPE, build_job, callable_step

# backends: names unique per team: constraints and their races (docs/testing.md).
pytestmark = [pytest.mark.django_db, pytest.mark.backends]


@pytest.fixture
def theirs(team) -> Process:
    """The first team's job ``orders`` (step ``orders_load``) and server ``landing``: the
    names the other team's developer probes."""
    ServerFactory(team=team.group, name="landing")
    return build_job(team.application, "orders", [callable_step("orders_load")])


@pytest.fixture
def outsider(team):
    return api_as(team.outsider)


def said(response) -> str:
    return response.content.decode()


def assert_reveals_nothing(response, team) -> None:
    """Nothing of the first team in the answer: not its team, application, or job ids."""
    text = said(response)
    assert team.group.name not in text
    assert f'"{team.application.name}"' not in text


def pipeline(application: str, name: str = "orders", steps=("orders_load",)) -> dict:
    return {
        "name": name,
        "application": application,
        "process_type": "generic-job",
        "steps": [{"name": s, "process_type": "python-callable"} for s in steps],
    }


# --- applications --------------------------------------------------------------------------


def test_another_team_names_an_application_like_ours(team, outsider):
    body = {"name": team.application.name, "team": team.other_group.pk}
    response = outsider.post("/api/v1/applications/", body, format="json")
    assert response.status_code == 201, said(response)
    assert BusDomain.objects.filter(name=team.application.name).count() == 2


def test_another_team_renames_its_application_like_ours(team, outsider):
    path = f"/api/v1/applications/{team.other_application.pk}/"
    response = outsider.patch(path, {"name": team.application.name}, format="json")
    assert response.status_code == 200, said(response)


def test_an_application_name_taken_in_ones_own_team_is_a_400_naming_it(team, outsider):
    body = {"name": team.other_application.name, "team": team.other_group.pk}
    response = outsider.post("/api/v1/applications/", body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "name": ["An application named ads exists already in team marketing."]
    }
    assert_reveals_nothing(response, team)


def test_two_applications_of_one_name_are_refused_by_the_database_only_in_one_team(team):
    BusDomainFactory(name=team.application.name, team=team.other_group)
    with pytest.raises(IntegrityError), transaction.atomic():
        BusDomainFactory(name=team.application.name, team=team.group)


def test_moving_an_application_into_a_team_where_its_job_names_are_taken_is_refused(team):
    # A member of both teams: he may see both teams' names.
    MembershipFactory(user=team.developer, team=team.other_group, role=Role.DEVELOPER)
    build_job(team.application, "orders", [callable_step("orders_load")])
    build_job(team.other_application, "orders", [callable_step("orders_load")])
    response = api_as(team.developer).patch(
        f"/api/v1/applications/{team.application.pk}/", {"team": team.other_group.pk}, format="json"
    )
    assert response.status_code == 400
    assert "orders, orders_load" in response.json()["team"][0]
    assert BusDomain.objects.get(pk=team.application.pk).team == team.group


# --- jobs and steps ------------------------------------------------------------------------


def test_another_team_creates_a_job_and_a_step_named_like_ours(team, theirs, outsider):
    job = outsider.post(
        "/api/v1/processes/",
        {"name": "orders", "bus_domain": team.other_application.pk, "process_type": JOB_TYPE},
        format="json",
    )
    assert job.status_code == 201, said(job)
    step = outsider.post(
        "/api/v1/processes/",
        {
            "name": "orders_load",
            "bus_domain": team.other_application.pk,
            "process_type": STEP_TYPE,
            "parent": job.json()["id"],
        },
        format="json",
    )
    assert step.status_code == 201, said(step)


def test_another_team_renames_its_job_like_ours(team, theirs, outsider):
    mine = build_job(team.other_application, "returns", [callable_step("returns_load")])
    path = f"/api/v1/processes/{mine.pk}/"
    assert outsider.patch(path, {"name": "orders"}, format="json").status_code == 200


def test_another_team_registers_a_pipeline_named_like_ours(team, theirs, outsider):
    document = pipeline(team.other_application.name)
    response = outsider.post("/api/v1/processes/pipeline/", document, format="json")
    assert response.status_code == 201, said(response)
    document = pipeline(team.other_application.name, "returns", ["orders_load"])
    imported = outsider.post("/api/v1/processes/import/", document, format="json")
    assert imported.status_code == 400  # orders_load is now the outsider's own
    assert "orders_load" in imported.json()["name"][0]
    assert_reveals_nothing(imported, team)


def test_another_team_makes_a_job_like_ours_from_a_template(team, theirs, outsider):
    template = registry.save_template(
        registry.TemplateSpec(
            "daily",
            team.other_application,
            JOB_TYPE,
            [registry.TemplateStepSpec("load", STEP_TYPE)],
        )
    )
    response = outsider.post(
        f"/api/v1/templates/{template.pk}/instantiate/", {"name": "orders"}, format="json"
    )
    assert response.status_code == 201, said(response)
    made = Process.objects.get(pk=response.json()["id"])
    assert [s.name for s in made.steps.all()] == ["orders_load"]


def test_a_job_name_taken_in_ones_own_team_is_a_400_naming_only_it(team, theirs, outsider):
    # The other team's own job, in one application; the duplicate in another one of its
    # applications: names are per team, not per application.
    build_job(team.other_application, "orders", [callable_step("orders_load")])
    second = BusDomainFactory(name="ads_eu", team=team.other_group)
    single = outsider.post(
        "/api/v1/processes/",
        {"name": "orders", "bus_domain": second.pk, "process_type": JOB_TYPE},
        format="json",
    )
    assert single.status_code == 400
    assert single.json() == {"name": ["A process named orders exists already in team marketing."]}
    whole = outsider.post("/api/v1/processes/pipeline/", pipeline("ads_eu"), format="json")
    assert whole.status_code == 400
    assert whole.json() == {
        "name": ["Processes named orders, orders_load exist already in team marketing."]
    }
    for response in (single, whole):
        assert_reveals_nothing(response, team)


def test_two_live_processes_of_one_name_are_refused_by_the_database_only_in_one_application(
    team,
):
    JobFactory(name="orders", bus_domain=team.application)
    JobFactory(name="orders", bus_domain=team.other_application)
    with pytest.raises(IntegrityError), transaction.atomic():
        JobFactory(name="orders", bus_domain=team.application)


def test_an_application_named_like_another_teams_is_found_as_ones_own(team, theirs, outsider):
    """A document names its application: the other team's ``web`` must be the outsider's own
    ``web``, never a 500 for two rows, never the first team's."""
    own_web = BusDomainFactory(name=team.application.name, team=team.other_group)
    response = outsider.post(
        "/api/v1/processes/pipeline/", pipeline("web", "clicks", ["clicks_load"]), format="json"
    )
    assert response.status_code == 201, said(response)
    assert Process.objects.get(pk=response.json()["id"]).bus_domain == own_web
    mine = api_as(team.developer).post(
        "/api/v1/processes/pipeline/", pipeline("web", "clicks", ["clicks_load"]), format="json"
    )
    assert mine.status_code == 201, said(mine)
    assert Process.objects.get(pk=mine.json()["id"]).bus_domain == team.application


def test_an_upstream_named_like_another_teams_job_is_ones_own(team, theirs, outsider):
    own = build_job(team.other_application, "orders", [callable_step("orders_load")])
    document = pipeline(team.other_application.name, "report", ["report_sum"])
    document["steps"][0]["upstream"] = ["orders"]
    response = outsider.post("/api/v1/processes/pipeline/", document, format="json")
    assert response.status_code == 201, said(response)
    step = Process.objects.get(name="report_sum")
    assert list(step.enqueuing_processes.all()) == [own]


def test_a_name_two_of_ones_own_teams_use_asks_for_the_id(team, theirs):
    MembershipFactory(user=team.developer, team=team.other_group, role=Role.DEVELOPER)
    BusDomainFactory(name=team.application.name, team=team.other_group)
    build_job(team.other_application, "orders", [callable_step("orders_load")])
    dev = api_as(team.developer)
    document = pipeline("web", "clicks", ["clicks_load"])
    ambiguous = dev.post("/api/v1/processes/pipeline/", document, format="json")
    assert ambiguous.status_code == 400
    assert "give its id" in ambiguous.json()["application"][0]
    document["application"] = team.application.pk
    document["steps"][0]["upstream"] = ["orders"]
    upstream = dev.post("/api/v1/processes/pipeline/", document, format="json")
    assert upstream.status_code == 400
    assert "give its id" in str(upstream.json()["steps"])
    document["steps"][0]["upstream"] = [theirs.pk]
    assert dev.post("/api/v1/processes/pipeline/", document, format="json").status_code == 201


def _register(application_id: int) -> str:
    try:
        build_job(
            BusDomain.objects.get(pk=application_id), "orders", [callable_step("orders_load")]
        )
        return "registered"
    except ValidationError as error:
        return error.message_dict["name"][0]


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_four_applications_of_one_team_registering_one_name_at_once_one_wins(team):
    """The database holds names per application only: the lock on the team's row makes the
    registry's per-team check and the insert one step (real processes, as
    tests/processes/test_concurrency.py; on PostgreSQL the lock, on SQLite the immediate
    transactions)."""
    applications = [team.application] + [
        BusDomainFactory(name=f"web{i}", team=team.group) for i in range(3)
    ]
    outcomes = in_children(_register, [(a.pk,) for a in applications])
    assert sorted(outcomes) == [
        *["Processes named orders, orders_load exist already in team analytics."] * 3,
        "registered",
    ]
    assert Process.objects.filter(name="orders", bus_domain__team=team.group).count() == 1


# --- the pages -----------------------------------------------------------------------------


def page_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def job_form(application: BusDomain, name: str = "orders", steps=("orders_load",)) -> dict:
    data = {
        "application": application.pk,
        "name": name,
        "job_type": JOB_TYPE,
        "max_retries": 3,
        "lease_seconds": 3600,
        "timezone": "UTC",
        "step-TOTAL_FORMS": len(steps),
        "step-INITIAL_FORMS": 0,
        "step-MIN_NUM_FORMS": 1,
        "step-MAX_NUM_FORMS": 1000,
        "register": "1",
    }
    for i, step in enumerate(steps):
        data.update({f"step-{i}-name": step, f"step-{i}-kind": STEP_TYPE})
    return data


def test_another_team_registers_a_job_named_like_ours_on_the_page(team, theirs):
    answer = page_as(team.outsider).post("/jobs/new/", job_form(team.other_application))
    assert answer.status_code == 302, answer.context["form"].errors
    made = Process.objects.get(name="orders", bus_domain=team.other_application)
    assert answer["Location"] == f"/jobs/{made.pk}/"


def test_a_name_taken_in_ones_own_team_is_said_on_the_page_naming_only_it(team, theirs):
    build_job(team.other_application, "orders", [callable_step("orders_load")])
    answer = page_as(team.outsider).post("/jobs/new/", job_form(team.other_application))
    assert answer.status_code == 200
    assert answer.context["form"].errors["name"] == [
        "Processes named orders, orders_load exist already in team marketing."
    ]


def test_the_page_tells_apart_two_of_ones_teams_names_by_their_team(team, theirs):
    MembershipFactory(user=team.developer, team=team.other_group, role=Role.DEVELOPER)
    BusDomainFactory(name=team.application.name, team=team.other_group)
    build_job(team.other_application, "orders", [callable_step("orders_load")])
    page = page_as(team.developer).get("/jobs/new/").content.decode()
    for label in ("web (analytics)", "web (marketing)", "orders (analytics)", "orders (marketing)"):
        assert label in page


def test_another_team_makes_a_job_named_like_ours_from_a_template_on_the_page(team, theirs):
    template = registry.save_template(
        registry.TemplateSpec(
            "daily",
            team.other_application,
            JOB_TYPE,
            [registry.TemplateStepSpec("load", STEP_TYPE)],
        )
    )
    answer = page_as(team.outsider).post(
        "/jobs/from-template/",
        {
            "template": template.pk,
            "application": team.other_application.pk,
            "name": "orders",
            "timezone": "UTC",
        },
    )
    assert answer.status_code == 302, answer.context["form"].errors
    assert Process.objects.filter(name="orders_load", bus_domain=team.other_application).exists()


# --- servers -------------------------------------------------------------------------------


@pytest.fixture
def their_admin(team):
    return MembershipFactory(
        user=UserFactory(username="marketing_admin"), team=team.other_group, role=Role.ADMIN
    ).user


def test_another_team_names_a_server_like_ours(team, theirs, their_admin):
    body = {"team": team.other_group.pk, "server_type": "s3", "name": "landing"}
    response = api_as(their_admin).post("/api/v1/servers/", body, format="json")
    assert response.status_code == 201, said(response)
    assert Server.objects.filter(name="landing").count() == 2


def test_a_server_name_taken_in_ones_own_team_is_a_400(team, theirs, their_admin):
    ServerFactory(team=team.other_group, name="landing")
    body = {"team": team.other_group.pk, "server_type": "s3", "name": "landing"}
    response = api_as(their_admin).post("/api/v1/servers/", body, format="json")
    assert response.status_code == 400
    assert_reveals_nothing(response, team)


# --- the command line and lineage ----------------------------------------------------------


def test_the_command_line_asks_for_the_team_when_two_teams_use_a_name(team, theirs, tmp_path):
    own = build_job(team.other_application, "orders", [callable_step("orders_load")])
    with pytest.raises(CommandError, match="--team"):
        call_command("export_job", "orders", stdout=None)
    out = tmp_path / "orders.json"
    with out.open("w") as stream:
        call_command("export_job", "orders", "--team", "marketing", stdout=stream)
    document = json.loads(out.read_text())
    assert document["application"] == "ads"
    registry.delete_process(own.pk)
    BusDomainFactory(name="ads", team=team.group)  # now both teams have an application "ads"
    with pytest.raises(CommandError, match=r"application named ads .*give its id or the team"):
        call_command("import_job", str(out), stdout=None)
    with open(tmp_path / "result.json", "w") as stream:
        call_command("import_job", str(out), "--team", "marketing", stdout=stream)
    imported = Process.objects.get(name="orders", deleted=False, bus_domain__team=team.other_group)
    assert imported.bus_domain == team.other_application


def test_two_teams_jobs_of_one_name_are_two_openlineage_jobs(team, theirs):
    own = build_job(team.other_application, "orders", [callable_step("orders_load")])
    mine = openlineage.run_event(InstanceExecFactory(process=theirs).pk, "START")["job"]
    other = openlineage.run_event(InstanceExecFactory(process=own).pk, "START")["job"]
    assert mine["name"] == other["name"] == "orders"
    assert mine["namespace"] == f"bdre.team-{team.group.pk}"
    assert other["namespace"] == f"bdre.team-{team.other_group.pk}"
