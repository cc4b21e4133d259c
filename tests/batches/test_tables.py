"""Issue 18, hole 2, without Spark: which tables a team reads and writes
(``batches.tables``), sharing them through the API, and the migration that gave every
registered table its team."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from batches import tables
from batches.models import HiveTable, TableShare
from processes.registry import StepSpec
from tests.helpers.api import api_as
from tests.helpers.jobs import build_job

pytestmark = pytest.mark.django_db


def orders(application, location: str = "/warehouse/sales/orders") -> HiveTable:
    return HiveTable.objects.create(
        dbname="sales",
        table_name="orders",
        location=location,
        ddl="struct<id:int,who:string>",
        bus_domain=application,
    )


def test_a_table_belongs_to_the_team_of_the_application_that_registered_it(team):
    assert orders(team.application).team == team.group


def test_two_teams_may_each_have_the_same_name(team):
    a, b = orders(team.application), orders(team.other_application, "/b")
    assert tables.readable_table(team.group.pk, "sales.orders") == a
    assert tables.readable_table(team.other_group.pk, "SALES.Orders") == b


def test_a_name_the_team_may_not_read_is_an_error_naming_what_it_may_read(team):
    orders(team.application)
    HiveTable.objects.create(dbname="mine", table_name="t", bus_domain=team.other_application)
    with pytest.raises(tables.TableNotReadable, match=r"sales.orders is not .* \(mine.t\)"):
        tables.readable_table(team.other_group.pk, "sales.orders")


def test_a_new_table_is_written_in_the_teams_folder(team, settings, tmp_path):
    settings.BDRE_WAREHOUSE = tmp_path
    orders(team.application, str(tmp_path / "sales" / "orders"))
    destination = tables.writable_table(team.other_group.pk, "Sales", "Orders")
    assert destination.existing is None
    assert (destination.dbname, destination.table_name) == ("sales", "orders")
    assert destination.location == str(tmp_path / f"team-{team.other_group.pk}/sales/orders")


def test_an_existing_registration_keeps_its_recorded_location(team):
    table = orders(team.application, "/old/warehouse/sales/orders")
    destination = tables.writable_table(team.group.pk, "sales", "orders")
    assert (destination.existing, destination.location) == (table, table.location)


@pytest.mark.parametrize("database, table", [("..", "etc"), ("sales/../..", "x"), ("a b", "t")])
def test_a_name_that_is_no_plain_identifier_is_never_a_folder(team, database, table):
    with pytest.raises(tables.TableNotWritable, match="letters, digits"):
        tables.writable_table(team.group.pk, database, table)


def test_a_new_table_never_lands_inside_or_around_another_teams_folder(team, settings, tmp_path):
    settings.BDRE_WAREHOUSE = tmp_path
    other = team.other_group.pk
    # A registration older than the team folders, whose folder a new name would fall into.
    orders(team.application, str(tmp_path / f"team-{other}" / "sales"))
    with pytest.raises(tables.TableNotWritable, match="another team's table"):
        tables.writable_table(other, "sales", "orders")


def test_a_shared_name_is_read_only(team):
    table = orders(team.application)
    tables.share(team.admin, table, team.other_group)
    assert tables.readable_table(team.other_group.pk, "sales.orders") == table
    with pytest.raises(tables.TableNotWritable, match="read-only"):
        tables.writable_table(team.other_group.pk, "sales", "orders")


def test_the_migration_gives_each_table_the_team_of_its_application(team):
    table = orders(team.other_application)
    HiveTable.objects.filter(pk=table.pk).update(team=team.group)  # as if unset
    migration = importlib.import_module("batches.migrations.0009_tables_per_team")
    migration.owner_from_application(apps, None)
    table.refresh_from_db()
    assert table.team == team.other_group


# The API: an admin of the owning team shares; nobody else does.


def share_body(table, team_) -> dict:
    return {"table": table.pk, "team": team_.pk}


def test_an_admin_shares_a_table_and_the_other_team_lists_it_as_shared(team):
    table = orders(team.application)
    created = api_as(team.admin).post(
        "/api/v1/table-shares/", share_body(table, team.other_group), format="json"
    )
    assert created.status_code == 201, created.content
    assert TableShare.objects.get().team == team.other_group
    listed = api_as(team.outsider).get("/api/v1/tables/").json()["results"]
    assert [(t["id"], t["shared"]) for t in listed] == [(table.pk, True)]
    own = api_as(team.viewer).get("/api/v1/tables/").json()["results"]
    assert [(t["id"], t["shared"]) for t in own] == [(table.pk, False)]


def test_an_unshared_table_is_not_listed_to_another_team(team):
    orders(team.application)
    assert api_as(team.outsider).get("/api/v1/tables/").json()["results"] == []


@pytest.mark.parametrize("who", ["viewer", "developer"])
def test_only_an_admin_of_the_owning_team_shares(team, who):
    table = orders(team.application)
    answer = api_as(getattr(team, who)).post(
        "/api/v1/table-shares/", share_body(table, team.other_group), format="json"
    )
    assert answer.status_code == 403
    assert not TableShare.objects.exists()


def test_another_team_cannot_share_itself_a_table(team):
    table = orders(team.application)
    answer = api_as(team.outsider).post(
        "/api/v1/table-shares/", share_body(table, team.other_group), format="json"
    )
    assert answer.status_code == 400
    assert "table" in answer.json()
    assert not TableShare.objects.exists()


def test_a_table_is_not_shared_with_its_own_team(team):
    table = orders(team.application)
    answer = api_as(team.admin).post(
        "/api/v1/table-shares/", share_body(table, team.group), format="json"
    )
    assert answer.status_code == 400


def test_an_admin_revokes_a_share_and_the_team_shared_with_cannot(team):
    table = orders(team.application)
    grant = tables.share(team.admin, table, team.other_group)
    assert api_as(team.outsider).delete(f"/api/v1/table-shares/{grant.pk}/").status_code == 404
    assert api_as(team.developer).delete(f"/api/v1/table-shares/{grant.pk}/").status_code == 403
    assert api_as(team.admin).delete(f"/api/v1/table-shares/{grant.pk}/").status_code == 204
    assert not TableShare.objects.exists()
    with pytest.raises(tables.TableNotReadable):
        tables.readable_table(team.other_group.pk, "sales.orders")


@pytest.mark.parametrize(
    "kind, properties",
    [
        (56, {"sql": {"query": "SELECT 1 AS a", "output_table": "../../etc.x"}}),
        (53, {"load": {"format": "csv", "table": "lake/../../x.t"}}),
        (55, {"shred": {"database": "../other"}}),
    ],
    ids=["sql", "load", "shred"],
)
def test_a_table_name_that_would_climb_out_is_refused_at_registration(team, kind, properties):
    with pytest.raises(ValidationError, match="letters, digits"):
        build_job(team, "climber", [StepSpec("climber_0", kind, properties=properties)])
