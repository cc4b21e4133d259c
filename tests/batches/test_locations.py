"""Storage is granted, not typed (docs/security.md): every location a team's steps and file
registrations name lies inside the team's roots. Each test is an attack a developer of one
team could try with what the UI and the API give him."""

from __future__ import annotations

import io
import os

import pytest
from django.core.management import call_command
from django.utils import timezone

from batches import file_batches
from batches.locations import LocationRefused, check_location, normalise, team_landing
from batches.models import Batch, File
from processes import orchestrator
from processes.models import (
    ExecState,
    InstanceExec,
    Process,
    ProcessLog,
    ProcessTypeId,
    Property,
    Server,
)
from processes.registry import StepSpec
from tests.helpers.api import api_as
from tests.helpers.factories import ServerFactory, UserFactory, grant_root
from tests.helpers.jobs import build_job

pytestmark = pytest.mark.django_db
SCAN, EXPORT = "generic-scan", "generic-export"


def pipeline(team, kind: str, properties: dict, name: str = "grab") -> dict:
    return {
        "name": name,
        "application": team.application.name,
        "process_type": "generic-job",
        "steps": [{"name": f"{name}_step", "process_type": kind, "properties": properties}],
    }


def register_pipeline(user, body: dict):
    return api_as(user).post("/api/v1/processes/pipeline/", body, format="json")


def other_landing(team) -> str:
    return team_landing(team.other_group.pk).as_uri()


# --- scan locations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "location",
    [
        "file:///etc",
        "/proc/self",
        "file:///",
        "file://otherhost/data",
        "{other}",  # another team's landing folder
        "{mine}/../team-{other_id}",  # out of one's own folder by ..
        "{warehouse}",  # the other team's tables
        "s3://any-bucket/any/prefix/",
        "hdfs://namenode/",
        "ftp://example.com/",
    ],
)
def test_a_scan_of_a_location_outside_the_teams_roots_is_a_400_naming_the_roots(
    team, settings, location
):
    location = location.format(
        other=other_landing(team),
        mine=team_landing(team.group.pk).as_uri(),
        other_id=team.other_group.pk,
        warehouse=(settings.BDRE_WAREHOUSE / f"team-{team.other_group.pk}").as_uri(),
    )
    response = register_pipeline(
        team.developer, pipeline(team, SCAN, {"scan": {"location": location}})
    )
    assert response.status_code == 400, response.content
    text = response.content.decode()
    assert team_landing(team.group.pk).as_uri() in text  # the allowed roots are named
    assert not Process.objects.filter(name__startswith="grab").exists()


def test_a_scan_of_the_teams_own_landing_folder_and_of_a_granted_root_is_registered(team, tmp_path):
    grant_root(team.group, tmp_path / "feed", name="feed")
    for name, location in (
        ("own", team_landing(team.group.pk).as_uri() + "/orders"),
        ("granted", (tmp_path / "feed" / "2026").as_uri()),
        ("plain", str(tmp_path / "feed")),
    ):
        response = register_pipeline(
            team.developer, pipeline(team, SCAN, {"scan": {"location": location}}, name)
        )
        assert response.status_code == 201, response.content


def test_a_root_granted_to_one_team_is_not_granted_to_another(team, tmp_path):
    grant_root(team.group, tmp_path / "feed")
    response = register_pipeline(
        team.outsider,
        {
            **pipeline(team, SCAN, {"scan": {"location": (tmp_path / "feed").as_uri()}}),
            "application": team.other_application.name,
        },
    )
    assert response.status_code == 400
    # The refusal names the outsider's own roots, never the other team's grant.
    assert "(server " not in response.content.decode()


def test_a_symlink_inside_the_teams_folder_that_leads_out_of_it_is_outside(team):
    mine = team_landing(team.group.pk)
    theirs = team_landing(team.other_group.pk)
    mine.mkdir(parents=True, exist_ok=True)
    theirs.mkdir(parents=True, exist_ok=True)
    link = mine / "shortcut"
    if link.is_symlink():
        link.unlink()
    os.symlink(theirs, link)
    with pytest.raises(LocationRefused, match="outside the storage granted"):
        check_location(team.group.pk, link.as_uri())
    with pytest.raises(LocationRefused):
        check_location(team.group.pk, str(link / "orders.tsv"))


def test_s3_and_s3a_are_one_scheme_and_dot_segments_are_refused(team):
    grant_root(team.group, "s3://lake/team-a/", server_type="s3")
    assert check_location(team.group.pk, "s3a://lake/team-a/in/") == "s3://lake/team-a/in/"
    assert check_location(team.group.pk, "S3://LAKE/team-a/x.tsv") == "s3://lake/team-a/x.tsv"
    for outside in ("s3://lake/team-b/", "s3://lake/team-ab/", "s3a://other/team-a/"):
        with pytest.raises(LocationRefused, match="allowed roots"):
            check_location(team.group.pk, outside)
    with pytest.raises(LocationRefused, match=r"'\.\.'"):
        check_location(team.group.pk, "s3a://lake/team-a/../team-b/")


def test_normalise_resolves_dots_and_file_uris_to_one_path(tmp_path):
    assert normalise(f"file://{tmp_path}/a/../b") == (tmp_path / "b").as_uri()
    assert normalise(f"{tmp_path}/./b/") == (tmp_path / "b").as_uri()
    with pytest.raises(LocationRefused, match="absolute path"):
        normalise("relative/path")
    # The API trims what it is given; a value stored otherwise is refused, not trimmed.
    for spaced in (f" {tmp_path}", f"{tmp_path}\n", f"{tmp_path}/a\tb"):
        with pytest.raises(LocationRefused):
            normalise(spaced)


def test_a_scan_location_changed_behind_the_registry_fails_the_step_before_it_lists(team):
    job = build_job(
        team,
        "ingest",
        [
            StepSpec(
                "scan",
                52,
                properties={"scan": {"location": team_landing(team.group.pk).as_uri()}},
            )
        ],
    )
    Property.objects.filter(process__parent=job, key="location").update(value="file:///etc")
    outcome = orchestrator.run_job(job.pk)
    assert not outcome.succeeded
    assert "outside the storage granted" in outcome.error
    run = InstanceExec.objects.get(process__parent=job)
    assert run.exec_state_id == ExecState.FAILED
    assert ProcessLog.objects.filter(instance_exec=run, message_id="location.refused").exists()
    assert not File.objects.exists()


# --- registered files ----------------------------------------------------------------------


def register_file(user, job, path: str, **extra):
    return api_as(user).post(
        "/api/v1/files/register/",
        {
            "source_process_id": job.pk,
            "path": path,
            "file_size": 10,
            "file_hash": "h",
            "creation_ts": "2026-11-20T10:00:00Z",
            **extra,
        },
        format="json",
    )


@pytest.fixture
def ingest(team, make_job):
    job = make_job("ingest")
    make_job("load", upstream=[job])
    return job


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "file:///etc/shadow",
        "{other}/orders.tsv",
        "{mine}/../team-{other_id}/orders.tsv",
        "relative/orders.tsv",
        "s3://bucket/orders.tsv",
        # Read by Hadoop otherwise than checked: what follows ? or # stays in its path and
        # ../ then climbs out; globs expand into the other team's folder.
        "{mine}/x?/../../team-{other_id}/secret.tsv",
        "file://{mine}/x#/../../team-{other_id}/secret.tsv",
        "{mine}/{{x,../team-{other_id}/secret.tsv}}",
        "{mine}/[x]/secret.tsv",
        "{mine}/*.tsv",
        "file://{mine}/x%3F/../../team-{other_id}/secret.tsv",
    ],
)
def test_a_file_outside_the_teams_roots_cannot_be_registered(team, ingest, path):
    path = path.format(
        other=other_landing(team),
        mine=team_landing(team.group.pk),
        other_id=team.other_group.pk,
    )
    batches = Batch.objects.count()
    response = register_file(team.developer, ingest, path)
    assert response.status_code == 400, response.content
    assert "allowed roots" in response.json()["path"][0] or "not allowed" in str(response.json())
    assert Batch.objects.count() == batches and not File.objects.exists()


def test_a_file_registered_by_another_team_in_its_own_folder_is_never_revealed(team, make_job):
    theirs = make_job("ingest")  # team A registers in its own landing folder
    path = str(team_landing(team.group.pk) / "secret.tsv")
    file_batches.register_file(
        source_process_id=theirs.pk,
        path=path,
        file_size=1,
        file_hash="h",
        creation_ts=timezone.now(),
    )
    from tests.helpers.factories import JobFactory, StepFactory

    mine = JobFactory(bus_domain=team.other_application)
    StepFactory(parent=mine)
    response = register_file(team.outsider, mine, path, file_hash="h")
    # Refused for where it is, before any look-up: not a 409 saying it is registered.
    assert response.status_code == 400
    assert "already registered" not in response.content.decode()


def test_a_file_on_a_granted_server_is_named_in_full_inside_its_root(team, ingest, tmp_path):
    server = grant_root(team.group, tmp_path / "feed")
    inside = (tmp_path / "feed" / "2026" / "a.tsv").as_uri()
    assert register_file(team.developer, ingest, inside, server_id=server.pk).status_code == 201
    assert File.objects.get().path == inside
    # A relative path would be checked under the root but read from the worker's folder.
    for relative in ("2026/b.tsv", "pyproject.toml", "../../etc/passwd"):
        answer = register_file(team.developer, ingest, relative, server_id=server.pk)
        assert answer.status_code == 400, relative
        assert "absolute path" in answer.content.decode()
    # Another of the team's roots is not this server's.
    elsewhere = str(team_landing(team.group.pk) / "c.tsv")
    assert register_file(team.developer, ingest, elsewhere, server_id=server.pk).status_code == 400


def test_the_cli_refuses_a_file_outside_the_roots_with_the_reason(ingest):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="allowed roots"):
        call_command(
            "register_file",
            "--source-process-id",
            str(ingest.pk),
            "--path",
            "/etc/passwd",
            "--file-size",
            "1",
            "--file-hash",
            "x",
            stdout=io.StringIO(),
        )


# --- export targets ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "export",
    [
        {"format": "csv", "location": "file:///tmp/anywhere"},
        {"format": "parquet", "location": "{warehouse}"},
        {"format": "jdbc", "jdbc_url": "jdbc:postgresql://127.0.0.1:5432/test", "jdbc_table": "t"},
        {"format": "jdbc", "jdbc_url": "jdbc:sqlite:/srv/bdre/var/bdre.sqlite3", "jdbc_table": "t"},
        {"format": "csv", "location": "{mine}/x?/../../team-{other_id}/sales/orders"},
        {"format": "csv", "location": "{mine}/{{x,../team-{other_id}}}/orders"},
    ],
)
def test_an_export_outside_the_teams_roots_is_a_400(team, settings, export):
    export = {
        k: v.format(
            warehouse=(settings.BDRE_WAREHOUSE / f"team-{team.other_group.pk}").as_uri(),
            mine=(settings.BDRE_WAREHOUSE / f"team-{team.group.pk}").as_uri(),
            other_id=team.other_group.pk,
        )
        for k, v in export.items()
    }
    body = pipeline(team, EXPORT, {"export": {"source_table": "lake.orders", **export}})
    response = register_pipeline(team.developer, body)
    assert response.status_code == 400, response.content
    assert "allowed roots" in response.content.decode()


def test_an_export_names_only_a_jdbc_driver_of_the_installations(team):
    grant_root(team.group, "jdbc:postgresql://reports.example.com/sales", server_type="jdbc")
    export = {
        "source_table": "lake.orders",
        "format": "jdbc",
        "jdbc_url": "jdbc:postgresql://reports.example.com/sales",
    }
    for driver, status in (("org.postgresql.Driver", 201), ("com.example.Evil", 400)):
        body = pipeline(team, EXPORT, {"export": {**export, "jdbc_driver": driver}}, f"x{status}")
        response = register_pipeline(team.developer, body)
        assert response.status_code == status, response.content
    assert "BDRE_JDBC_DRIVERS" in response.content.decode()


@pytest.mark.parametrize(
    ("extra", "status", "says"),
    [
        ({"jdbc_table": "reports.daily_orders"}, 201, ""),
        ({"jdbc_table": "orders; DROP TABLE users"}, 400, "export.jdbc_table must be a plain"),
        ({"jdbc_table": "orders WHERE 1=1 --"}, 400, "export.jdbc_table must be a plain"),
        ({"jdbc_table": "orders", "mode": "ignore"}, 400, "export.mode must be append or"),
    ],
)
def test_an_export_names_a_plain_database_table_and_a_known_mode(team, extra, status, says):
    """The table goes into the statement that replaces an earlier attempt's rows."""
    grant_root(team.group, "jdbc:postgresql://reports.example.com/sales", server_type="jdbc")
    export = {
        "source_table": "lake.orders",
        "format": "jdbc",
        "jdbc_url": "jdbc:postgresql://reports.example.com/sales",
        **extra,
    }
    response = register_pipeline(team.developer, pipeline(team, EXPORT, {"export": export}))
    assert response.status_code == status, response.content
    assert says in response.content.decode()


def test_an_export_to_a_granted_jdbc_url_or_the_teams_folder_is_registered(team, tmp_path):
    grant_root(team.group, "jdbc:postgresql://reports.example.com:5432/sales", server_type="jdbc")
    for name, export in (
        ("db", {"format": "jdbc", "jdbc_url": "jdbc:postgresql://reports.example.com:5432/sales"}),
        ("files", {"format": "csv", "location": team_landing(team.group.pk).as_uri() + "/out"}),
    ):
        body = pipeline(team, EXPORT, {"export": {"source_table": "lake.orders", **export}}, name)
        assert register_pipeline(team.developer, body).status_code == 201


def test_a_property_changed_through_the_api_is_checked_as_well(team, tmp_path):
    body = pipeline(
        team, SCAN, {"scan": {"location": team_landing(team.group.pk).as_uri()}}, "feed"
    )
    assert register_pipeline(team.developer, body).status_code == 201
    prop = Property.objects.get(process__name="feed_step", key="location")
    response = api_as(team.developer).patch(
        f"/api/v1/properties/{prop.pk}/", {"value": "file:///etc"}, format="json"
    )
    assert response.status_code == 400
    assert "allowed roots" in response.content.decode()
    assert Property.objects.get(pk=prop.pk).value == team_landing(team.group.pk).as_uri()


# --- who grants roots ----------------------------------------------------------------------


def test_a_team_admin_cannot_grant_his_team_a_root(team):
    api = api_as(team.admin)
    body = {"team": team.group.pk, "server_type": "local", "name": "mine", "root": "file:///"}
    response = api.post("/api/v1/servers/", body, format="json")
    assert response.status_code == 403
    assert not Server.objects.filter(name="mine").exists()
    server = grant_root(team.group, "/srv/feeds/a", name="feeds")
    for change in ({"root": "file:///srv/feeds"}, {"granted_teams": [team.other_group.pk]}):
        response = api.patch(f"/api/v1/servers/{server.pk}/", change, format="json")
        assert response.status_code == 403, change
    # Nor move the grant to another team, nor point it elsewhere, nor delete it: a granting
    # server is the installation's whole (its endpoint and credentials decide where the
    # granted teams' steps read).
    for change in (
        {"team": team.other_group.pk},
        {"metainfo": "endpoint_url=http://127.0.0.1:9/"},
        {"login_user": "svc"},
    ):
        response = api.patch(f"/api/v1/servers/{server.pk}/", change, format="json")
        assert response.status_code == 403, change
    assert api.delete(f"/api/v1/servers/{server.pk}/").status_code == 403
    server.refresh_from_db()
    assert server.root == "file:///srv/feeds/a" and not server.granted_teams.exists()
    assert server.team == team.group and server.login_user == "" and server.metainfo == ""
    # A server that grants nothing stays the team admin's.
    plain = ServerFactory(team=team.group, name="sftp")
    response = api.patch(f"/api/v1/servers/{plain.pk}/", {"login_user": "svc"}, format="json")
    assert response.status_code == 200


def test_granting_answers_403_whether_the_team_id_exists_or_not(team):
    api = api_as(team.admin)
    plain = ServerFactory(team=team.group, name="sftp")
    for teams in ([team.other_group.pk], [99_999_999]):
        response = api.patch(
            f"/api/v1/servers/{plain.pk}/", {"granted_teams": teams}, format="json"
        )
        assert response.status_code == 403, teams


def test_a_superuser_grants_a_root_to_teams_and_they_see_the_server(team):
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    body = {
        "team": team.group.pk,
        "server_type": "s3",
        "name": "lake",
        "root": "s3a://lake/shared/",
        "granted_teams": [team.other_group.pk],
    }
    response = api_as(root).post("/api/v1/servers/", body, format="json")
    assert response.status_code == 201, response.content
    assert check_location(team.other_group.pk, "s3://lake/shared/x/") == "s3://lake/shared/x/"
    names = [s["name"] for s in api_as(team.outsider).get("/api/v1/servers/").json()["results"]]
    assert names == ["lake"]
    bad = api_as(root).post(
        "/api/v1/servers/", {**body, "name": "bad", "root": "s3://x/../y"}, format="json"
    )
    assert bad.status_code == 400


# --- rows stored before roots were enforced -----------------------------------------------


def test_check_locations_reports_rows_outside_and_exits_1(team, make_job):
    job = make_job("ingest")
    clean = io.StringIO()
    call_command("check_locations", stdout=clean)
    assert "Every stored location" in clean.getvalue()
    step = job.steps.get()
    Property.objects.create(process=step, config_group="x", key="y", value="irrelevant")
    Process.objects.filter(pk=step.pk).update(process_type_id=ProcessTypeId.GENERIC_SCAN)
    Property.objects.create(process=step, config_group="scan", key="location", value="file:///etc")
    batch = Batch.objects.create(bus_domain=team.application, batch_type="file")
    File.objects.create(
        batch=batch, path="/proc/self/environ", file_size=1, file_hash="h",
        creation_ts=timezone.now(),
    )  # fmt: skip
    teamless = Batch.objects.create(batch_type="file")  # made by hand, no team's
    File.objects.create(
        batch=teamless, path="/landing/x.tsv", file_size=1, file_hash="h",
        creation_ts=timezone.now(),
    )  # fmt: skip
    ServerFactory(team=team.group, server_type="local", root="ftp://example.com/")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("check_locations", stdout=out, stderr=err)
    assert exit_.value.code == 1
    assert "file:///etc" in out.getvalue() and "/proc/self/environ" in out.getvalue()
    assert "/landing/x.tsv\n  the file's batch has no team" in out.getvalue()
    assert "ftp://example.com/\n  not a valid root" in out.getvalue()
    assert "4 stored location(s)" in err.getvalue()


# --- a scan's server and endpoint ----------------------------------------------------------


def test_a_scan_cannot_name_its_own_endpoint(team):
    grant_root(team.group, "s3://lake/acme/", server_type="s3", name="lake")
    scan = {
        "location": "s3://lake/acme/",
        "server": "lake",
        "endpoint_url": "http://127.0.0.1:9/anything",  # would get the server's signed requests
    }
    response = register_pipeline(team.developer, pipeline(team, SCAN, {"scan": scan}))
    assert response.status_code == 400
    assert "endpoint_url" in response.content.decode()


def test_a_scans_server_is_checked_at_registration(team, tmp_path):
    theirs = grant_root(team.other_group, tmp_path / "theirs", name="theirs")
    mine = grant_root(team.group, tmp_path / "mine", name="mine")
    for name, scan in (
        ("a", {"location": (tmp_path / "mine").as_uri(), "server": str(theirs.pk)}),
        ("b", {"location": (tmp_path / "mine").as_uri(), "server": "99999"}),
        ("c", {"location": team_landing(team.group.pk).as_uri(), "server": "mine"}),
    ):
        response = register_pipeline(team.developer, pipeline(team, SCAN, {"scan": scan}, name))
        assert response.status_code == 400, (name, response.content)
    ok = {"location": (tmp_path / "mine" / "in").as_uri(), "server": str(mine.pk)}
    assert (
        register_pipeline(team.developer, pipeline(team, SCAN, {"scan": ok}, "d")).status_code
        == 201
    )


def test_a_scan_lists_with_the_granted_server_whose_root_holds_its_location(team, tmp_path):
    from batches.ingest.scan import ScanOptions

    grant_root(team.group, tmp_path / "feeds", name="feeds")
    inner = grant_root(team.group, tmp_path / "feeds" / "acme", name="acme")
    body = pipeline(
        team, SCAN, {"scan": {"location": (tmp_path / "feeds" / "acme" / "in").as_uri()}}
    )
    assert register_pipeline(team.developer, body).status_code == 201
    assert ScanOptions.of(Process.objects.get(name="grab_step")).server == inner


# --- when a step runs ----------------------------------------------------------------------


@pytest.mark.parametrize("changed", ["path", "server"])
def test_a_claimed_file_outside_the_roots_fails_the_step_before_it_reads(
    team, make_job, tmp_path, changed
):
    ingest = make_job("ingest")
    load = make_job("load", upstream=[ingest])
    file_batches.register_file(
        source_process_id=ingest.pk,
        path=str(team_landing(team.group.pk) / "a.tsv"),
        file_size=1,
        file_hash="h",
        creation_ts=timezone.now(),
    )
    # A row older than the check, or changed where no service looks: another path, or the
    # server of another team, whose root and credentials it would be read with.
    if changed == "path":
        File.objects.update(path="/etc/passwd")
        said = "/etc/passwd is outside the storage granted"
    else:
        File.objects.update(server=grant_root(team.other_group, tmp_path / "theirs"))
        said = "its server is not a server of the team"
    outcome = orchestrator.run_job(load.pk)
    assert not outcome.succeeded
    assert said in outcome.error
    run = InstanceExec.objects.get(process__parent=load)
    assert ProcessLog.objects.filter(instance_exec=run, message_id="location.refused").exists()


def test_moving_an_application_takes_its_files_registration_with_it(team, make_job):
    from bdre.models import Membership, Role

    ingest = make_job("ingest")
    make_job("load", upstream=[ingest])
    file_batches.register_file(
        source_process_id=ingest.pk,
        path=str(team_landing(team.group.pk) / "a.tsv"),
        file_size=1,
        file_hash="h",
        creation_ts=timezone.now(),
    )
    Membership.objects.create(user=team.admin, team=team.other_group, role=Role.ADMIN)
    response = api_as(team.admin).patch(
        f"/api/v1/applications/{team.application.pk}/",
        {"team": team.other_group.pk},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert File.objects.get().team == team.other_group


def test_a_root_granted_over_the_table_store_never_reaches_another_teams_tables(team, settings):
    """With the tables on an object store, a server root granted over the same bucket (the
    landing prefix's, say) reaches the team's own table folder there, never another team's
    nor the store's top."""
    settings.BDRE_TABLE_STORE = "s3://lake/tables"
    grant_root(team.group, "s3://lake/", server_type="s3")
    mine, other = team.group.pk, team.other_group.pk
    assert check_location(mine, "s3://lake/landing/orders/") == "s3://lake/landing/orders/"
    assert check_location(mine, f"s3a://lake/tables/team-{mine}/out/x")
    for location in (
        f"s3://lake/tables/team-{other}/sales/orders",
        f"s3a://lake/tables/team-{other}/",
        "s3://lake/tables",
        "s3://lake/tables/",
        f"s3://lake/tables/team-{mine}0/sales/orders",
    ):
        with pytest.raises(LocationRefused, match="BDRE_TABLE_STORE"):
            check_location(mine, location)
    # no server granted: the team's own table folder is one of its roots, as under the warehouse
    assert check_location(other, f"s3://lake/tables/team-{other}/exports/")


def test_a_root_granted_over_bdres_folders_never_reaches_another_teams(team, settings, tmp_path):
    """A server root over the folder that holds BDRE's landing and warehouse (``/data``)
    reaches the team's own folders there, never another team's tables, landed files, step
    logs or manifests."""
    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    settings.BDRE_LANDING = tmp_path / "landing"
    grant_root(team.group, tmp_path)
    mine, other = team.group.pk, team.other_group.pk
    assert check_location(mine, (tmp_path / "feeds" / "acme").as_uri())
    assert check_location(mine, (tmp_path / "warehouse" / f"team-{mine}" / "out").as_uri())
    for location in (
        tmp_path / "warehouse" / f"team-{other}" / "sales" / "orders",
        tmp_path / "landing" / f"team-{other}" / "a.csv",
        tmp_path / "warehouse" / "step-logs",
        tmp_path / "warehouse",
    ):
        with pytest.raises(LocationRefused, match="BDRE_"):
            check_location(mine, str(location))
