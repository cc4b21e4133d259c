"""Backfill, rewind and reprocess (processes/replay.py) as a user drives them through the API:
the plan first, then the batches rebuilt from their own input and every batch downstream of
them, each in its own target batch again; nothing new queued twice, nothing else touched."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.utils import timezone

from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, BatchState, File
from bdre.errors import BdreError
from processes import orchestrator, tasks
from processes.models import ExecState, InstanceExec, Process, Trigger
from tests.helpers.api import api_as
from tests.helpers.jobs import build_job, load_step, scan_step, sql_step
from tests.helpers.spark import published

pytestmark = pytest.mark.django_db


def _file(name: str) -> File:
    return File.objects.get(path__endswith=f"/{name}")


def _runs(job: Process) -> list[tuple[int, str, int]]:
    return list(
        InstanceExec.objects.filter(process=job)
        .order_by("id")
        .values_list("target_batch_id", "trigger", "exec_state_id")
    )


def test_a_file_reprocessed_rebuilds_its_batch_and_the_batches_downstream_only(
    team, chain, queued, drive, committed
):
    first_tidy, second_tidy = chain.targets["tidy"]
    first_report, second_report = chain.targets["report"]
    batches_before = Batch.objects.count()
    client = api_as(team.developer)
    url = f"/api/v1/files/{_file('a.csv').pk}/reprocess/"

    preview = client.post(url, {"preview": True}, format="json")
    assert preview.status_code == 200, preview.content
    plan = preview.json()
    assert plan["trigger"] == "reprocess" and plan["batches"] == [first_tidy]
    assert [(r["job"], r["target_batch_id"], r["level"]) for r in plan["rebuilds"]] == [
        ("tidy", first_tidy, 0),
        ("report", first_report, 1),
    ]
    assert plan["rebuilds"][0]["inputs"] == sorted(
        [_file("a.csv").batch_id, _file("b.csv").batch_id]
    )
    assert plan["rebuilds"][1]["inputs"] == [first_tidy]
    assert not queued and ArchiveConsumpQueue.objects.filter(target_batch_id=first_tidy).exists()

    with committed():
        started = client.post(url, {}, format="json")
    assert started.status_code == 202, started.content
    (run,) = started.json()["runs"]
    assert run["url"].endswith(f"/api/v1/runs/{run['run']}/")
    drive()
    # report does not follow its upstream: its next run (by hand here) rebuilds its batch.
    assert orchestrator.run_job(chain.report.pk).succeeded

    assert _runs(chain.tidy) == [
        (first_tidy, "manual", ExecState.SUCCESS),
        (second_tidy, "manual", ExecState.SUCCESS),
        (first_tidy, "reprocess", ExecState.SUCCESS),
    ]
    assert _runs(chain.report) == [
        (first_report, "manual", ExecState.SUCCESS),
        (second_report, "manual", ExecState.SUCCESS),
        (first_report, "replay", ExecState.SUCCESS),
    ]
    assert Batch.objects.count() == batches_before  # no new batch anywhere
    assert not BatchConsumpQueue.objects.exists()  # nothing left waiting, nothing twice
    consumed = ArchiveConsumpQueue.objects.filter(process__parent=chain.report)
    assert sorted(consumed.values_list("source_batch_id", "target_batch_id")) == [
        (first_tidy, first_report),
        (second_tidy, second_report),
    ]
    with pytest.raises(BdreError) as nothing:
        orchestrator.run_job(chain.report.pk)
    assert nothing.value.code == 112


def test_a_backfill_rebuilds_each_batch_of_the_days_in_turn(team, chain, queued, drive, committed):
    today = timezone.localdate()
    with committed():
        answer = api_as(team.developer).post(
            f"/api/v1/processes/{chain.tidy.pk}/backfill/",
            {"since": str(today - timedelta(days=1)), "until": str(today)},
            format="json",
        )
    assert answer.status_code == 202, answer.content
    assert answer.json()["plan"]["batches"] == chain.targets["tidy"]
    assert answer.json()["rows_put_back"] == 3  # a, b; c
    drive()  # the first run's success starts the job again for the second batch
    assert [t for t, trigger, _ in _runs(chain.tidy)[2:]] == chain.targets["tidy"]
    assert [trigger for _, trigger, _ in _runs(chain.tidy)[2:]] == ["backfill", "replay"]
    assert sorted(BatchConsumpQueue.objects.values_list("target_batch_id", "batch_state_id")) == [
        (t, BatchState.FAILED) for t in chain.targets["report"]
    ]  # report's batches, to rebuild


def test_a_rewind_rebuilds_from_the_batch_on(team, chain, queued):
    step = chain.tidy.steps.get()
    answer = api_as(team.developer).post(
        f"/api/v1/processes/{step.pk}/rewind/",
        {"batch": _file("c.csv").batch_id, "preview": True},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    assert [(r["job"], r["target_batch_id"]) for r in answer.json()["rebuilds"]] == [
        ("tidy", chain.targets["tidy"][1]),
        ("report", chain.targets["report"][1]),
    ]


def test_a_second_reprocess_while_the_first_waits_is_409(team, chain, queued):
    client = api_as(team.developer)
    url = f"/api/v1/batches/{chain.targets['report'][0]}/reprocess/"
    assert client.post(url, {}, format="json").status_code == 202
    again = client.post(url, {}, format="json")
    assert again.status_code == 409 and again.json()["code"] == 118


def test_nothing_to_reprocess_and_bad_input_are_clear(team, chain, queued):
    client = api_as(team.developer)
    today = timezone.localdate()
    empty = client.post(
        f"/api/v1/processes/{chain.tidy.pk}/backfill/",
        {"since": str(today - timedelta(days=9)), "until": str(today - timedelta(days=8))},
        format="json",
    )
    assert empty.status_code == 409 and "delivered no batch" in empty.json()["message"]
    backwards = client.post(
        f"/api/v1/processes/{chain.tidy.pk}/backfill/",
        {"since": str(today), "until": str(today - timedelta(days=1))},
        format="json",
    )
    assert backwards.status_code == 400 and "until" in backwards.json()
    assert not queued and not BatchConsumpQueue.objects.exists()


@pytest.mark.parametrize(("who", "status"), [("viewer", 403), ("outsider", 404)])
def test_only_the_owning_teams_developers_reprocess(team, chain, queued, who, status):
    for url in (
        f"/api/v1/files/{_file('a.csv').pk}/reprocess/",
        f"/api/v1/batches/{chain.targets['tidy'][0]}/reprocess/",
        f"/api/v1/processes/{chain.tidy.pk}/backfill/",
    ):
        today = str(timezone.localdate())
        answer = api_as(getattr(team, who)).post(
            url, {"since": today, "until": today, "preview": True}, format="json"
        )
        assert answer.status_code == status, (url, answer.content)
        assert "tidy" not in answer.content.decode()
    assert not BatchConsumpQueue.objects.exists()


def test_a_run_records_what_started_it(team, chain, queued, committed):
    assert {t for _, t, _ in _runs(chain.tidy)} == {Trigger.MANUAL}
    with committed():
        tasks.enqueue_run(chain.report.pk)
    assert queued[-1] == ("job", chain.report.pk, "upstream")


def _pipeline(team, landing, prefix: str) -> SimpleNamespace:
    """ingest -> orders (spark.load into lake.<prefix>orders) -> totals (spark.sql of each
    orders batch into lake.<prefix>totals)."""
    ingest = build_job(team, f"{prefix}ingest", [scan_step(f"{prefix}ingest_0", landing)])
    load = load_step(
        f"{prefix}orders_0",
        f"lake.{prefix}orders",
        format="csv",
        upstream=[ingest],
        schema="id INT, amount INT",
    )
    orders = build_job(team, f"{prefix}orders", [load])
    query = (
        f"SELECT count(*) AS orders, sum(amount) AS total FROM lake.{prefix}orders "
        "WHERE batch_id IN ({batch_ids})"
    )
    totals = build_job(
        team,
        f"{prefix}totals",
        [sql_step(f"{prefix}totals_0", query, output=f"lake.{prefix}totals", upstream=[orders])],
    )
    return SimpleNamespace(ingest=ingest, orders=orders, totals=totals)


def _land_and_run(pipeline: SimpleNamespace, landing, files: dict[str, str]) -> None:
    for name, rows in files.items():
        (landing / name).write_text("id,amount\n" + rows)
    for job in (pipeline.ingest, pipeline.orders, pipeline.totals):
        outcome = orchestrator.run_job(job.pk)
        assert outcome.succeeded, outcome.error


def _rows(spark, table: str):
    from batches.models import HiveTable

    location = HiveTable.objects.get(dbname="lake", table_name=table).location
    return published(spark, location)


def _partitions(spark, table: str) -> dict[str, float]:
    """Each file of the table's partitions and when it was written."""

    from batches.models import HiveTable

    root = Path(HiveTable.objects.get(dbname="lake", table_name=table).location)
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*.parquet")}


def test_a_bad_file_fixed_and_reprocessed_gives_the_rows_of_a_clean_run(
    team, tmp_path, settings, spark, queued, drive, committed
):
    from pyspark.testing import assertDataFrameEqual

    from tests.helpers.factories import grant_root

    settings.BDRE_WAREHOUSE = tmp_path / "warehouse"
    landing, clean_landing = tmp_path / "landing", tmp_path / "clean"
    for folder in (landing, clean_landing):
        folder.mkdir()
        grant_root(team.group, folder)
    bad, fixed = "1,100\n2,20\n", "1,10\n2,20\n"
    dirty = _pipeline(team, landing, "")
    _land_and_run(dirty, landing, {"a.csv": bad, "b.csv": "3,30\n"})
    _land_and_run(dirty, landing, {"c.csv": "4,40\n"})
    clean = _pipeline(team, clean_landing, "clean_")
    _land_and_run(clean, clean_landing, {"a.csv": fixed, "b.csv": "3,30\n"})
    _land_and_run(clean, clean_landing, {"c.csv": "4,40\n"})
    orders_before, totals_before = _partitions(spark, "orders"), _partitions(spark, "totals")
    second_orders = InstanceExec.objects.filter(process=dirty.orders).order_by("id")[1]

    (landing / "a.csv").write_text("id,amount\n" + fixed)
    bad_file = File.objects.get(path=(landing / "a.csv").as_uri())
    client = api_as(team.developer)
    plan = client.post(f"/api/v1/files/{bad_file.pk}/reprocess/", {"preview": True}, format="json")
    assert plan.status_code == 200, plan.content
    first_orders = plan.json()["batches"][0]
    assert plan.json()["partitions"] == [
        f"lake.orders/batch_id={first_orders}",
        f"lake.totals/batch_id={plan.json()['rebuilds'][1]['target_batch_id']}",
    ]
    with committed():
        assert (
            client.post(f"/api/v1/files/{bad_file.pk}/reprocess/", {}, format="json").status_code
            == 202
        )
    drive()
    with committed():
        assert orchestrator.run_job(dirty.totals.pk).succeeded

    # Row for row, but for the batch ids and the landing folders, which differ by design.
    for table in ("orders", "totals"):
        assertDataFrameEqual(
            _rows(spark, table).drop("batch_id", "source_file"),
            _rows(spark, f"clean_{table}").drop("batch_id", "source_file"),
        )
    # Exactly the planned partitions were written again; the second batch's are untouched.
    orders_after, totals_after = _partitions(spark, "orders"), _partitions(spark, "totals")
    untouched = f"batch_id={second_orders.target_batch_id}/"
    assert {p: t for p, t in orders_after.items() if p.startswith(untouched)} == {
        p: t for p, t in orders_before.items() if p.startswith(untouched)
    }
    rewritten = {p.split("/")[0] for p in orders_after if orders_after[p] != orders_before.get(p)}
    assert rewritten == {f"batch_id={first_orders}"}
    assert {p.split("/")[0] for p in totals_after} == {p.split("/")[0] for p in totals_before}


def test_a_backfill_of_a_paused_job_puts_its_batches_back_and_waits_for_the_resume(
    team, chain, queued, drive, committed
):
    from processes import schedules

    schedules.pause(chain.tidy.pk)  # tidy has no timed schedule: a pause holds it all the same
    today = timezone.localdate()
    client = api_as(team.developer)
    url = f"/api/v1/processes/{chain.tidy.pk}/backfill/"
    body = {"since": str(today - timedelta(days=1)), "until": str(today)}
    preview = client.post(url, {**body, "preview": True}, format="json").json()
    assert preview["paused"] == [chain.tidy.pk]
    with committed():
        answer = client.post(url, body, format="json")
    assert answer.status_code == 202, answer.content
    assert answer.json()["runs"] == [] and answer.json()["paused"] == [chain.tidy.pk]
    assert answer.json()["rows_put_back"] == 3
    drive()
    assert len(_runs(chain.tidy)) == 2  # nothing started while paused

    # The resume starts what the pause held: nothing else would for a job without a timer.
    with committed():
        assert client.post(f"/api/v1/processes/{chain.tidy.pk}/resume/").status_code == 200
    assert queued == [("job", chain.tidy.pk, "upstream")]
    drive()  # each success starts the next rebuild, the pause lifted
    assert [t for t, _, _ in _runs(chain.tidy)[2:]] == chain.targets["tidy"]


def test_the_rebuilds_left_of_a_backfill_wait_when_the_job_is_paused_midway(
    team, chain, queued, drive, committed
):
    from processes import schedules

    today = timezone.localdate()
    with committed():
        api_as(team.developer).post(
            f"/api/v1/processes/{chain.tidy.pk}/backfill/",
            {"since": str(today - timedelta(days=1)), "until": str(today)},
            format="json",
        )
    schedules.pause(chain.tidy.pk)  # after the first run started, before it ends
    drive()
    assert [t for t, _, _ in _runs(chain.tidy)[2:]] == chain.targets["tidy"][:1]
    assert BatchConsumpQueue.objects.filter(
        process__parent=chain.tidy, target_batch_id=chain.targets["tidy"][1]
    ).exists()  # the second batch waits for the resume


def test_plans_for_a_job_or_step_that_does_not_exist_are_102_and_103(db):
    from datetime import date

    from processes import replay

    with pytest.raises(BdreError) as job:
        replay.plan_backfill(999_999, date(2026, 11, 1), date(2026, 11, 2))
    with pytest.raises(BdreError) as step:
        replay.plan_rewind(999_999, 1)
    assert (int(job.value.code), int(step.value.code)) == (102, 103)


def test_a_backfill_whose_range_is_backwards_is_119(chain):
    from processes import replay

    today = timezone.localdate()
    with pytest.raises(BdreError) as refused:
        replay.plan_backfill(chain.tidy.pk, today, today - timedelta(days=1))
    assert (refused.value.code, refused.value.http_status) == (119, 400)


def test_a_rebuild_reaching_another_teams_job_is_120_and_names_none_of_it(chain):
    from django.db.models import Q

    from processes import replay
    from tests.helpers.factories import BusDomainFactory

    theirs = BusDomainFactory(name="their-app")
    Process.objects.filter(Q(pk=chain.report.pk) | Q(parent=chain.report)).update(bus_domain=theirs)
    with pytest.raises(BdreError) as refused:
        replay.plan_reprocess_batch(chain.targets["tidy"][0])
    assert (refused.value.code, refused.value.http_status) == (120, 409)
    assert "report" not in refused.value.message
