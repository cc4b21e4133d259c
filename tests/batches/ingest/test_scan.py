"""Incremental file ingestion (DESIGN.md section 5), each case on a local folder and on a
real S3 endpoint."""

from __future__ import annotations

import pytest

from batches import file_batches
from batches.ingest.scan import ScanConfigError, scan
from batches.ingest.storage import StorageError
from batches.models import BatchConsumpQueue, File, ScanState
from processes import orchestrator
from processes.models import InstanceExec, ProcessLog, Property

pytestmark = pytest.mark.django_db


def registered_paths() -> list[str]:
    return sorted(File.objects.values_list("path", flat=True))


def test_the_seed_scenario_two_hours_of_files(ingest_job, landing):
    _job, step, consumer = ingest_job()
    landing.put("1.txt")
    landing.put("2.txt")
    first = scan(step.pk)
    assert first.registered == 2
    assert registered_paths() == [landing.uri("1.txt"), landing.uri("2.txt")]
    for key in ("3.txt", "4.txt", "5.txt"):
        landing.put(key)
    second = scan(step.pk)
    assert second.registered == 3
    assert second.listed == 3  # only what is after the marker
    assert sorted(File.objects.values_list("path", flat=True))[2:] == [
        landing.uri(k) for k in ("3.txt", "4.txt", "5.txt")
    ]
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 5
    assert scan(step.pk).registered == 0


def test_each_file_becomes_a_batch_queued_downstream_with_its_date(ingest_job, landing):
    _job, step, consumer = ingest_job()
    landing.put("a.tsv", b"x" * 42)
    result = scan(step.pk)
    (f,) = File.objects.all()
    assert f.file_size == 42
    assert f.file_hash
    assert result.batch_ids == [f.batch_id]
    (row,) = BatchConsumpQueue.objects.filter(process=consumer)
    assert row.source_batch_id == f.batch_id
    assert row.batch_marking == f.creation_ts.date().isoformat()


def test_a_current_file_is_skipped_then_registered_once_renamed(ingest_job, landing):
    _job, step, _ = ingest_job()
    landing.put("1.txt")
    landing.put("2.txt_current")
    first = scan(step.pk)
    assert (first.registered, first.skipped_in_flight) == (1, 1)
    landing.rename("2.txt_current", "2.txt")
    second = scan(step.pk)
    assert second.registered == 1
    assert registered_paths() == [landing.uri("1.txt"), landing.uri("2.txt")]


@pytest.mark.parametrize("name", ["_tmp_upload", ".part1", "big.csv._COPYING_"])
def test_other_in_flight_patterns_are_skipped(ingest_job, landing, name):
    _job, step, _ = ingest_job()
    landing.put(name)
    result = scan(step.pk)
    assert (result.registered, result.skipped_in_flight) == (0, 1)


def test_zero_byte_objects_are_skipped(ingest_job, landing):
    _job, step, _ = ingest_job()
    landing.put("empty.txt", b"")
    assert scan(step.pk).skipped_empty == 1
    assert not File.objects.exists()


def test_a_young_file_holds_the_marker_until_it_is_old_enough(ingest_job, landing):
    _job, step, _ = ingest_job(min_age_seconds=3600)
    landing.put("1.txt")
    landing.put("2.txt")
    held = scan(step.pk)
    assert (held.registered, held.skipped_young) == (0, 2)
    assert ScanState.objects.get(process=step).marker == ""
    Property.objects.filter(process=step, key="min_age_seconds").update(value="0")
    assert scan(step.pk).registered == 2


def test_a_late_key_below_the_marker_is_found_by_reconciliation(ingest_job, landing):
    _job, step, _ = ingest_job(reconcile_every=0)
    for key in ("1.txt", "2.txt", "5.txt"):
        landing.put(key)
    scan(step.pk)
    landing.put("3.txt")  # a late upload, below the marker "5.txt"
    missed = scan(step.pk)
    assert missed.registered == 0
    found = scan(step.pk, reconcile=True)
    assert (found.registered, found.late, found.reconciled) == (1, 1, True)
    assert landing.uri("3.txt") in registered_paths()
    assert ProcessLog.objects.filter(process=step, message_id="late_key").count() == 1
    assert scan(step.pk, reconcile=True).late == 0


def test_reconciliation_runs_every_n_scans(ingest_job, landing):
    _job, step, _ = ingest_job(reconcile_every=3)
    reconciled = [scan(step.pk).reconciled for _ in range(6)]
    assert reconciled == [False, False, True, False, False, True]


def test_an_overwritten_key_is_ignored_by_default(ingest_job, landing):
    _job, step, _ = ingest_job()
    landing.put("1.txt", b"first")
    scan(step.pk)
    landing.put("1.txt", b"second version")
    result = scan(step.pk, reconcile=True)
    assert (result.overwritten, result.registered) == (1, 0)
    assert File.objects.count() == 1


def test_an_overwritten_key_is_registered_again_with_reprocess(ingest_job, landing):
    _job, step, consumer = ingest_job(on_overwrite="reprocess")
    landing.put("1.txt", b"first")
    scan(step.pk)
    landing.put("1.txt", b"second version")
    result = scan(step.pk, reconcile=True)
    assert (result.overwritten, result.registered, result.late) == (1, 1, 0)
    assert sorted(File.objects.values_list("file_size", flat=True)) == [5, 14]
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 2


def test_max_files_works_off_a_backlog_over_several_scans(ingest_job, landing):
    _job, step, _ = ingest_job(max_files=3, page_size=2)
    for i in range(7):
        landing.put(f"{i}.txt")
    counts = [scan(step.pk).registered for _ in range(4)]
    assert counts == [3, 3, 1, 0]
    assert registered_paths() == sorted(landing.uri(f"{i}.txt") for i in range(7))


def test_a_crash_in_the_middle_of_a_page_registers_nothing_of_it(ingest_job, landing, monkeypatch):
    _job, step, consumer = ingest_job(page_size=3)
    for i in range(5):
        landing.put(f"{i}.txt")
    real = file_batches.register_files
    calls = {"n": 0}

    def crash_on_second_page(**kwargs):
        calls["n"] += 1
        ids = real(**kwargs)  # the rows are written ...
        if calls["n"] == 2:
            raise RuntimeError("worker died")  # ... and the transaction never commits
        return ids

    monkeypatch.setattr(file_batches, "register_files", crash_on_second_page)
    with pytest.raises(RuntimeError):
        scan(step.pk)
    assert File.objects.count() == 3  # the first page, whole
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 3
    assert ScanState.objects.get(process=step).marker == "2.txt"
    monkeypatch.setattr(file_batches, "register_files", real)
    assert scan(step.pk).registered == 2
    assert File.objects.count() == 5
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 5


def test_list_calls_do_not_grow_with_the_files_already_registered(ingest_job, landing):
    _job, step, _ = ingest_job(page_size=10)
    calls = {}
    for total in (15, 60):
        for i in range(len(registered_paths()), total):
            landing.put(f"f{i:04d}.txt")
        scan(step.pk)
        landing.put(f"f{total:04d}.txt")
        result = scan(step.pk)
        assert (result.registered, result.listed) == (1, 1)
        calls[total] = result.list_calls
    assert calls[15] == calls[60] == 1


def test_nested_folders_are_listed_in_key_order(ingest_job, landing):
    _job, step, _ = ingest_job()
    for key in ("2026/11/20/a.txt", "2026/11/21/b.txt", "2026.txt"):
        landing.put(key)
    scan(step.pk)
    landing.put("2026/11/22/c.txt")
    result = scan(step.pk)
    assert (result.registered, result.listed) == (1, 1)
    assert len(registered_paths()) == 4


def test_scan_as_the_step_of_a_job_stores_its_numbers_on_the_run(ingest_job, landing):
    job, step, consumer = ingest_job()
    landing.put("1.txt")
    landing.put("2.txt_current")
    outcome = orchestrator.run_job(job.pk)
    assert outcome.succeeded
    run = InstanceExec.objects.get(process=step)
    assert run.counters["registered"] == 1
    assert run.counters["skipped_in_flight"] == 1
    assert run.counters["list_calls"] >= 1
    # The files are the downstream input; the ingest run's own target batch is not queued.
    (row,) = BatchConsumpQueue.objects.filter(process=consumer)
    assert row.source_batch_id == File.objects.get().batch_id


def test_a_missing_location_property_is_a_clear_error(ingest_job, landing):
    _job, step, _ = ingest_job()
    Property.objects.filter(process=step, key="location").delete()
    with pytest.raises(ScanConfigError, match=r"scan\.location is required"):
        scan(step.pk)


def test_a_bad_number_is_a_clear_error(ingest_job, landing):
    _job, step, _ = ingest_job(max_files="lots")
    with pytest.raises(ScanConfigError, match=r"scan\.max_files must be a number"):
        scan(step.pk)


@pytest.mark.parametrize("landing", ["s3"], indirect=True)
def test_s3_credentials_and_endpoint_from_a_registered_server(ingest_job, landing, team):
    from processes.models import Server

    server = Server.objects.create(
        team=team.group,
        server_type="s3",
        name="minio",
        metainfo=f"endpoint_url={landing.endpoint}\nregion=us-east-1",
        login_user="AKIAEXAMPLE",
        login_password="secret-example-key",
    )
    _job, step, _ = ingest_job()
    Property.objects.filter(process=step, key__in=["endpoint_url", "region"]).delete()
    Property.objects.create(process=step, config_group="scan", key="server", value="minio")
    landing.put("1.txt")
    result = scan(step.pk)
    assert result.registered == 1
    assert File.objects.get().server == server


def test_an_unknown_server_is_a_clear_error(ingest_job, landing):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="is not a server of the team"):
        ingest_job(server="nowhere")
    _job, step, _ = ingest_job()
    # Set where the registry does not look: the scan says the same.
    Property.objects.create(process=step, config_group="scan", key="server", value="nowhere")
    with pytest.raises(ScanConfigError, match="is not a server of the team"):
        scan(step.pk)


@pytest.mark.parametrize("landing", ["s3"], indirect=True)
def test_a_server_whose_secret_no_key_reads_fails_the_scan_saying_so(
    ingest_job, landing, team, settings
):
    from processes.models import Server
    from tests.helpers.servers import lose_key_of

    server = Server.objects.create(
        team=team.group,
        server_type="s3",
        name="minio",
        metainfo=f"endpoint_url={landing.endpoint}",
        login_user="AKIAEXAMPLE",
        login_password="secret-example-key",
    )
    lose_key_of(settings, server)
    _job, step, _ = ingest_job()
    Property.objects.create(process=step, config_group="scan", key="server", value="minio")
    landing.put("1.txt")
    with pytest.raises(StorageError, match="minio: its stored secret cannot be read"):
        scan(step.pk)
    assert not File.objects.exists()


def test_a_key_spark_would_read_as_a_pattern_is_passed_over_and_said(ingest_job, landing):
    from processes.models import ProcessLog

    _job, step, _ = ingest_job()
    landing.put("a[1].txt")
    landing.put("b.txt")
    result = scan(step.pk)
    assert (result.registered, result.skipped_unsafe) == (1, 1)
    assert File.objects.get().path == landing.uri("b.txt")
    line = ProcessLog.objects.get(process=step, message_id="unsafe_key")
    assert "a[1].txt" in line.message and "rename it" in line.message


def test_files_are_hashed_before_the_transaction_that_registers_them(
    ingest_job, landing, monkeypatch
):
    from django.db import connection

    from batches.ingest import storage as storages

    _job, step, _ = ingest_job(page_size=2)
    for i in range(3):
        landing.put(f"{i}.txt")
    depths = []
    for cls in (storages.LocalStorage, storages.S3Storage):
        real = cls.content_hash

        def recording(self, obj, real=real):
            depths.append(len(connection.atomic_blocks))
            return real(self, obj)

        monkeypatch.setattr(cls, "content_hash", recording)
    outside = len(connection.atomic_blocks)  # the test's own transaction
    assert scan(step.pk).registered == 3
    assert depths == [outside] * 3


def _registered_meanwhile(monkeypatch, *, index: int) -> None:
    """Between hashing a page and registering it, a concurrent scan registers the page's
    file ``index`` (once)."""
    from batches.ingest.scan import _Scanner

    real = _Scanner.hash_page
    done = []

    def hash_then_race(self, uris, known):
        hashes = real(self, uris, known)
        if not done:
            uri, obj = list(uris.items())[index]
            file_batches.register_file(
                source_process_id=self.job.pk,
                path=uri,
                file_size=obj.size,
                file_hash=hashes[uri],
                creation_ts=obj.last_modified,
                server_id=self.server_id,
            )
            done.append(uri)
        return hashes

    monkeypatch.setattr(_Scanner, "hash_page", hash_then_race)


def test_a_file_registered_while_the_page_was_hashed_is_counted_already_registered(
    ingest_job, landing, monkeypatch
):
    _job, step, consumer = ingest_job()
    for i in range(3):
        landing.put(f"{i}.txt")
    _registered_meanwhile(monkeypatch, index=1)
    result = scan(step.pk)
    assert (result.registered, result.already_registered, result.capped) == (2, 1, False)
    assert registered_paths() == sorted(landing.uri(f"{i}.txt") for i in range(3))
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 3
    assert ScanState.objects.get(process=step).marker == "2.txt"


def test_a_capped_page_raced_leaves_its_unhashed_files_for_the_next_scan(
    ingest_job, landing, monkeypatch
):
    _job, step, consumer = ingest_job(max_files=2)
    for i in range(4):
        landing.put(f"{i}.txt")
    _registered_meanwhile(monkeypatch, index=0)
    first = scan(step.pk)
    # 0.txt registered meanwhile; 1.txt and 2.txt new; 3.txt never hashed: left, marker below.
    assert (first.registered, first.already_registered, first.capped) == (2, 1, True)
    assert ScanState.objects.get(process=step).marker == "2.txt"
    second = scan(step.pk)
    assert (second.registered, second.already_registered) == (1, 0)
    assert registered_paths() == sorted(landing.uri(f"{i}.txt") for i in range(4))
    assert BatchConsumpQueue.objects.filter(process=consumer).count() == 4


def test_two_steps_share_a_location_each_taking_the_files_its_include_names(ingest_job, landing):
    _job, events, _ = ingest_job(include="*.tsv")
    _other, pages, _ = ingest_job(include="pages-*.csv, *.json")
    for key in ("a.tsv", "b.tsv", "pages-1.csv", "pages-2.json", "notes.txt"):
        landing.put(key)
    taken = scan(events.pk)
    assert (taken.registered, taken.skipped_excluded) == (2, 3)
    assert scan(pages.pk).registered == 2
    assert registered_paths() == [
        landing.uri(k) for k in ("a.tsv", "b.tsv", "pages-1.csv", "pages-2.json")
    ]
    # Each marker stands at the step's own last file: another step's files neither hold it
    # back nor push it on, so that a file of its own that sorts below them (c.tsv below
    # pages-1.csv) is found by the next scan, not left to the reconciliation.
    assert ScanState.objects.get(process=events).marker == "b.tsv"
    assert ScanState.objects.get(process=pages).marker == "pages-2.json"
    landing.put("c.tsv")
    found = scan(events.pk, reconcile=False)
    assert (found.registered, found.late) == (1, 0)


# --- issue 28, attack 9: only the folder's own files -----------------------------------------


@pytest.fixture
def team_landings(team, settings, tmp_path):
    """Each team's own landing folder (no granted root), and a scan of the first team's."""
    from batches.locations import team_landing
    from tests.helpers.jobs import build_job, scan_step

    settings.BDRE_LANDING = tmp_path / "landing"
    ours, theirs = team_landing(team.group.pk), team_landing(team.other_group.pk)
    ours.mkdir(parents=True)
    theirs.mkdir(parents=True)
    job = build_job(team, "ingest_ours", [scan_step("scan_ours", ours)])
    return ours, theirs, job.steps.get()


def test_a_hard_link_to_another_teams_file_is_passed_over_counted_and_said(team_landings):
    import os

    ours, theirs, step = team_landings
    (theirs / "payroll.tsv").write_text("alice\t100000\n")
    os.link(theirs / "payroll.tsv", ours / "payroll.tsv")  # the attack: one more name
    (ours / "orders.tsv").write_text("1\t2.5\n")
    result = scan(step.pk)
    assert (result.registered, result.skipped_hard_link) == (1, 1)
    assert registered_paths() == [(ours / "orders.tsv").as_uri()]
    assert result.counters()["skipped_hard_link"] == 1
    line = ProcessLog.objects.get(process=step, message_id="not_own_file")
    assert "payroll.tsv" in line.message and "hard link" in line.message
    # It never holds the marker: passed over for good, as a name Spark would read as a pattern.
    assert ScanState.objects.get(process=step).marker == "payroll.tsv"


def test_a_fifo_socket_or_symlink_in_the_folder_is_passed_over_without_reading_it(team_landings):
    import os
    import socket

    ours, theirs, step = team_landings
    os.mkfifo(ours / "a.fifo")  # nobody writes to it: reading it would wait forever
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(ours / "b.sock"))
        (theirs / "payroll.tsv").write_text("alice\t100000\n")
        os.symlink(theirs / "payroll.tsv", ours / "c.tsv")
        os.symlink(theirs, ours / "d")  # a folder's link is no folder of the team's either
        (ours / "e.tsv").write_text("1\t2.5\n")
        result = scan(step.pk)
    assert (result.registered, result.skipped_not_regular) == (1, 4)
    assert (result.skipped_empty, result.skipped_hard_link) == (0, 0)
    assert registered_paths() == [(ours / "e.tsv").as_uri()]
    said = ProcessLog.objects.filter(process=step, message_id="not_own_file")
    assert sorted(line.message.split(":")[0] for line in said) == ["a.fifo", "b.sock", "c.tsv", "d"]
    assert all("not a regular file" in line.message for line in said)


def test_the_scan_run_says_how_many_files_it_passed_over_as_not_the_teams_own(team_landings):
    import os

    ours, theirs, step = team_landings
    (theirs / "payroll.tsv").write_text("alice\t100000\n")
    os.link(theirs / "payroll.tsv", ours / "payroll.tsv")
    os.mkfifo(ours / "a.fifo")
    outcome = orchestrator.run_job(step.parent_id)
    assert outcome.succeeded, outcome.error
    run = InstanceExec.objects.get(process=step)
    assert (run.counters["skipped_hard_link"], run.counters["skipped_not_regular"]) == (1, 1)
    summary = ProcessLog.objects.get(process=step, message_id="scan_summary").message
    assert "hard links 1, not regular files 1" in summary


def test_a_file_replaced_by_a_link_or_a_fifo_after_the_listing_is_refused_when_opened(tmp_path):
    import os
    import signal

    from batches.ingest.storage import LocalStorage, NotOwnFile

    storage = LocalStorage(tmp_path)
    (tmp_path / "other.tsv").write_text("theirs\n")
    for name in ("a.tsv", "b.tsv", "c.tsv"):
        (tmp_path / name).write_text("ours\n")
    listed = {o.key: o for page in storage.pages() for o in page}
    assert {k: o.not_own for k, o in listed.items()} == dict.fromkeys(listed)
    for name in ("a.tsv", "b.tsv", "c.tsv"):
        (tmp_path / name).unlink()
    os.link(tmp_path / "other.tsv", tmp_path / "a.tsv")
    os.symlink(tmp_path / "other.tsv", tmp_path / "b.tsv")
    os.mkfifo(tmp_path / "c.tsv")

    def hung(signum, frame):
        raise AssertionError("the scan waited on a FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)  # a deadline, not a wait: opening a FIFO must not block at all
    try:
        refused = {}
        for name in ("a.tsv", "b.tsv", "c.tsv"):
            with pytest.raises(NotOwnFile) as exc:
                storage.content_hash(listed[name])
            refused[name] = exc.value.reason
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert refused == {
        "a.tsv": "skipped_hard_link",
        "b.tsv": "skipped_not_regular",
        "c.tsv": "skipped_not_regular",
    }


def test_a_file_swapped_for_a_hard_link_between_listing_and_hashing_is_not_registered(
    team_landings, monkeypatch
):
    import os

    from batches.ingest.storage import LocalStorage

    ours, theirs, step = team_landings
    (theirs / "payroll.tsv").write_text("alice\t100000\n")
    (ours / "orders.tsv").write_text("1\t2.5\n")
    real = LocalStorage.content_hash

    def swap_then_hash(self, obj):
        # The team's own writer races the scan: a listed file becomes another team's file.
        (ours / "orders.tsv").unlink()
        os.link(theirs / "payroll.tsv", ours / "orders.tsv")
        return real(self, obj)

    monkeypatch.setattr(LocalStorage, "content_hash", swap_then_hash)
    result = scan(step.pk)
    assert (result.registered, result.skipped_hard_link) == (0, 1)
    assert not File.objects.exists()
    line = ProcessLog.objects.get(process=step, message_id="not_own_file")
    assert line.message.startswith("orders.tsv: passed over: a hard link")
