"""The ``ingest.scan`` step: turn new files of a location into batches.

A scan lists only the keys after its marker, page by page, hashes a page's files, then
registers the page in one short transaction together with the marker's advance, so a crash in
the middle of a page registers nothing of it and the next scan lists the page again.

Keys that are not ready are passed over: zero-byte objects, keys matching the in-flight
patterns (``*_current``, ``_*``, ``.*``, ``*._COPYING_`` by default) and keys younger than
``min_age_seconds``. While such a key was modified within ``hold_seconds`` (a day by
default) the marker stops just before it, because the finished file may come back under that
key or a name that sorts just below it (``2.txt_current`` becomes ``2.txt``); the keys after
it are still registered, and listed again by the next scan at the cost of a look-up. An older
one (a ``_SUCCESS`` flag, an abandoned upload) no longer holds the marker.

In a local folder only the folder's own files are registered: a hard link (another name of
a file, maybe in another team's folder, that the location check cannot see) and anything that
is not a regular file (a symbolic link, FIFO, socket, device) are passed over, counted
(``skipped_hard_link``, ``skipped_not_regular``) and logged (``not_own_file``); like a name
Spark would read as a pattern, they never hold the marker. The file is checked again on what
is opened to hash it, and the load checks it once more (``processes.step_kinds.spark_io``).

A key that appears below the marker (a rename, a late upload) is found by the reconciliation
listing, every ``reconcile_every`` scans or on demand, and counted as late.

``include`` (comma list of name patterns, ``*.tsv``) keeps the step to some files of the
location: the others are never registered, and neither hold the marker back nor move it
(the marker stands at the step's own last file), so that two steps can share one location,
each taking its own kind of file; each lists the other's files after its marker again.
"""

from __future__ import annotations

import bisect
import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from batches import file_batches
from batches.ingest.storage import (
    NOT_OWN,
    PAGE_SIZE,
    NotOwnFile,
    ObjectInfo,
    Storage,
    StorageError,
    open_storage,
)
from batches.locations import UNSAFE, LocationRefused, TeamStorage, scan_server
from batches.models import File, ScanState
from processes.models import Process, Property, Server
from processes.steplog import StepLogger

DEFAULT_IN_FLIGHT = ("*_current", "_*", ".*", "*._COPYING_")
UNSAFE_KEY_REASON = (
    "passed over: Spark would read a name with ?, #, {}, [], * or \\ as a pattern, not as "
    "this file; rename it"
)
OVERWRITE_CHOICES = ("ignore", "reprocess")


class ScanConfigError(ValueError):
    """A scan property is missing or invalid; the message names it."""


@dataclass
class ScanOptions:
    location: str
    min_age_seconds: int = 60
    hold_seconds: int = 86_400
    in_flight_patterns: tuple[str, ...] = DEFAULT_IN_FLIGHT
    include: tuple[str, ...] = ()  # name patterns of the files the step takes; (): all
    max_files: int = 10_000
    reconcile_every: int = 24
    on_overwrite: str = "ignore"
    page_size: int = PAGE_SIZE
    server: Server | None = None
    region: str = ""

    @classmethod
    def of(cls, step: Process) -> ScanOptions:
        """From the step's properties in config group ``scan``."""
        props = dict(
            Property.objects.filter(process=step, config_group="scan").values_list("key", "value")
        )
        if not props.get("location"):
            raise ScanConfigError(f"{step.name}: property scan.location is required")

        def number(key: str, default: int, minimum: int = 0) -> int:
            raw = props.get(key, "")
            if raw == "":
                return default
            try:
                value = int(raw)
            except ValueError as exc:
                raise ScanConfigError(
                    f"{step.name}: scan.{key} must be a number, got {raw!r}"
                ) from exc
            if value < minimum:
                raise ScanConfigError(f"{step.name}: scan.{key} must be at least {minimum}")
            return value

        on_overwrite = props.get("on_overwrite", "ignore") or "ignore"
        if on_overwrite not in OVERWRITE_CHOICES:
            raise ScanConfigError(
                f"{step.name}: scan.on_overwrite must be one of {', '.join(OVERWRITE_CHOICES)}"
            )
        try:
            server = scan_server(TeamStorage(step.bus_domain.team_id), props)
        except LocationRefused as exc:
            raise ScanConfigError(f"{step.name}: {exc}") from exc
        patterns = props.get("in_flight_patterns")
        include = props.get("include", "")
        return cls(
            location=props["location"],
            min_age_seconds=number("min_age_seconds", 60),
            hold_seconds=number("hold_seconds", 86_400),
            in_flight_patterns=(
                tuple(p.strip() for p in patterns.split(",") if p.strip())
                if patterns is not None
                else DEFAULT_IN_FLIGHT
            ),
            include=tuple(p.strip() for p in include.split(",") if p.strip()),
            max_files=number("max_files", 10_000, 1),
            reconcile_every=number("reconcile_every", 24),
            on_overwrite=on_overwrite,
            page_size=number("page_size", PAGE_SIZE, 1),
            server=server,
            region=props.get("region", ""),
        )

    def takes(self, key: str) -> bool:
        """Whether the step takes the file ``key`` (``include``); another step's otherwise."""
        name = key.rsplit("/", 1)[-1]
        return not self.include or any(fnmatch.fnmatchcase(name, p) for p in self.include)

    def open(self) -> Storage:
        metainfo: dict[str, str] = {}
        if self.server is not None and not self.server.secrets_readable:
            # An unreadable secret reads as "": listing with it would fail as "access
            # denied" (or fall back to the worker's own credentials) instead of saying why.
            raise StorageError(
                f"server {self.server.name}: its stored secret cannot be read with any key "
                "of FIELD_ENCRYPTION_KEY; re-enter it (docs/security.md)"
            )
        if self.server is not None:
            for line in self.server.metainfo.splitlines():
                key, _, value = line.partition("=")
                if value:
                    metainfo[key.strip()] = value.strip()
        return open_storage(
            self.location,
            endpoint_url=metainfo.get("endpoint_url"),
            region=self.region or metainfo.get("region"),
            access_key=self.server.login_user if self.server else None,
            secret_key=self.server.login_password if self.server else None,
        )


@dataclass
class ScanResult:
    listed: int = 0
    list_calls: int = 0
    registered: int = 0
    already_registered: int = 0
    skipped_in_flight: int = 0
    skipped_empty: int = 0
    skipped_unsafe: int = 0  # names Spark would read as a pattern (batches.locations.UNSAFE)
    skipped_hard_link: int = 0  # local files with other names, maybe another team's (NOT_OWN)
    skipped_not_regular: int = 0  # symbolic links, FIFOs, sockets, devices (NOT_OWN)
    skipped_excluded: int = 0  # names ``include`` does not take: another step's files
    skipped_young: int = 0
    overwritten: int = 0
    late: int = 0
    reconciled: bool = False
    capped: bool = False
    marker: str = ""
    batch_ids: list[int] = field(default_factory=list)

    def counters(self) -> dict[str, int | bool | str]:
        data = asdict(self)
        data.pop("batch_ids")
        return data


Progress = Callable[[ScanResult], None]
_Registered = tuple[str, int, datetime]  # a registration's file hash, size and time


@dataclass
class _Scanner:
    step: Process
    job: Process
    options: ScanOptions
    storage: Storage
    now: datetime
    run_id: int | None
    result: ScanResult
    progress: Progress | None
    not_own: set[str] = field(default_factory=set)  # uris found no file of the folder's own

    @property
    def server_id(self) -> int | None:
        return self.options.server.pk if self.options.server else None

    def in_flight(self, key: str) -> bool:
        name = key.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(name, p) for p in self.options.in_flight_patterns)

    def excluded(self, key: str) -> bool:
        return not self.options.takes(key)

    def remaining(self) -> int:
        return self.options.max_files - self.result.registered

    def marker_scan(self, marker: str) -> None:
        hold_after = self.now - timedelta(seconds=self.options.hold_seconds)
        held = False  # a recent key that is not ready holds the marker back
        for page in self.storage.pages(marker, self.options.page_size):
            candidates: list[ObjectInfo] = []
            passable: list[str] = []  # keys the marker may move past, ascending
            for obj in page:
                reason = self.not_ready(obj)
                if reason is None:
                    candidates.append(obj)
                else:
                    setattr(self.result, reason, getattr(self.result, reason) + 1)
                    if reason == "skipped_unsafe":
                        # Never readable whatever its age: it does not hold the marker.
                        self.log("unsafe_key", f"{obj.key}: {UNSAFE_KEY_REASON}")
                    elif reason in NOT_OWN:
                        # Never the team's own file whatever its age: nor does this.
                        self.log_not_own(obj.key, reason)
                    elif reason == "skipped_excluded":
                        # Another step's file neither holds the marker nor moves it: past
                        # it, a file of this step's that sorts below it (events-2.tsv below
                        # pages-1.csv) would be late, left to the reconciliation.
                        continue
                    else:
                        held = held or obj.last_modified > hold_after
                if not held:
                    passable.append(obj.key)
            stopped = self.register_page(candidates, passable, late=False)
            self.report()
            if stopped:
                self.result.capped = True
                return

    def not_ready(self, obj: ObjectInfo) -> str | None:
        """Why a key is passed over this time (the counter to bump), or None if ready."""
        if obj.not_own is not None:  # before its size: a FIFO or a link lists as empty
            return obj.not_own
        if obj.size == 0:
            return "skipped_empty"
        if UNSAFE.search(obj.key):
            return "skipped_unsafe"
        # In flight before excluded: an upload's temporary name (x.tsv_current) holds the
        # marker of a step that takes its final name (x.tsv sorts below it).
        if self.in_flight(obj.key):
            return "skipped_in_flight"
        if self.excluded(obj.key):
            return "skipped_excluded"
        if obj.last_modified > self.now - timedelta(seconds=self.options.min_age_seconds):
            return "skipped_young"
        return None

    def reconcile(self, marker: str) -> None:
        """List the keys at or below the marker and register those never registered."""
        self.result.reconciled = True
        for page in self.storage.pages("", self.options.page_size):
            below = [o for o in page if o.key <= marker]
            candidates = [o for o in below if self.not_ready(o) is None]
            stopped = self.register_page(candidates, [], late=True)
            self.report()
            if stopped:
                self.result.capped = True
                return
            if len(below) < len(page):
                return

    def register_page(
        self, candidates: list[ObjectInfo], passable: list[str], *, late: bool
    ) -> bool:
        """Register a page's new files and move the marker past the ``passable`` keys, in one
        transaction. Returns True when ``max_files`` stopped the page part-way: the marker
        then stays below the first file left for the next scan.

        The files are hashed first, outside the transaction (hashing reads a local file
        whole; a transaction held open that long would hold the database's write lock as
        long): the transaction only looks up again what is registered, registers the rest
        and moves the marker, together."""
        uris = {self.storage.uri_of(o.key): o for o in candidates}
        hashes = self.hash_page(uris, self.registered(uris))
        # Replaced by a link or a FIFO since it was listed: passed over as if listed so.
        uris = {uri: obj for uri, obj in uris.items() if uri not in self.not_own}
        with transaction.atomic():
            # Looked up again: a concurrent scan may have registered some files meanwhile.
            known = self.registered(uris)
            new: list[file_batches.NewFile] = []
            stop_at: str | None = None  # the first key left for the next scan
            for uri, obj in uris.items():
                previous = known.get(uri, [])
                if self.same_local_file(obj, previous):
                    self.result.already_registered += 1  # same size and time: same local file
                    continue
                file_hash = hashes.get(uri)
                if file_hash is None:
                    # Past the file that looked like reaching max_files before the
                    # transaction (fewer were new once a concurrent scan had registered
                    # some): never hashed, so left for the next scan.
                    stop_at = obj.key
                    break
                if any(h == file_hash for h, _, _ in previous):
                    self.result.already_registered += 1
                    continue
                if previous:
                    self.result.overwritten += 1
                    self.log("overwritten", f"{uri} changed (hash {file_hash})")
                    if self.options.on_overwrite != "reprocess":
                        continue
                if len(new) >= self.remaining():
                    stop_at = obj.key
                    break
                new.append(file_batches.NewFile(uri, obj.size, file_hash, obj.last_modified))
                if late and not previous:
                    self.result.late += 1
                    self.log("late_key", f"{uri} appeared below the marker")
            advance_to = passable[-1] if passable else None
            if stop_at is not None:
                before = passable[: bisect.bisect_left(passable, stop_at)]
                advance_to = before[-1] if before else None
            made = self.register(new)
            self.result.batch_ids += made
            self.result.registered += len(made)
            self.result.already_registered += len(new) - len(made)
            if advance_to is not None:
                ScanState.objects.filter(process=self.step).update(
                    marker=Greatest(F("marker"), Value(advance_to))
                )
                self.result.marker = max(self.result.marker, advance_to)
        return stop_at is not None

    def registered(self, uris: Mapping[str, ObjectInfo]) -> dict[str, list[_Registered]]:
        """The registrations of the team's files at these paths: (hash, size, time) each."""
        known: dict[str, list[_Registered]] = {}
        for path, file_hash, size, created in File.objects.filter(
            team_id=self.job.bus_domain.team_id, server=self.server_id, path__in=list(uris)
        ).values_list("path", "file_hash", "file_size", "creation_ts"):
            known.setdefault(path, []).append((file_hash, size, created))
        return known

    @staticmethod
    def same_local_file(obj: ObjectInfo, previous: list[_Registered]) -> bool:
        """A local file registered with the same size and time: taken as the same file,
        without reading it (an object store's files have an etag: compared by it)."""
        return obj.etag is None and any(
            size == obj.size and created == obj.last_modified for _, size, created in previous
        )

    def hash_page(
        self, uris: Mapping[str, ObjectInfo], known: Mapping[str, list[_Registered]]
    ) -> dict[str, str]:
        """The hashes ``register_page`` will need, by uri: those of the page's files it
        cannot tell registered without one, in order, up to the first new file beyond
        ``max_files`` (the one that stops the page), as it would read them. A file that
        proves, once opened, not to be the folder's own is counted, said and put in
        ``not_own`` instead."""
        hashes: dict[str, str] = {}
        new = 0
        for uri, obj in uris.items():
            previous = known.get(uri, [])
            if self.same_local_file(obj, previous):
                continue
            try:
                hashes[uri] = file_hash = self.storage.content_hash(obj)
            except NotOwnFile as exc:
                setattr(self.result, exc.reason, getattr(self.result, exc.reason) + 1)
                self.log_not_own(obj.key, exc.reason)
                self.not_own.add(uri)
                continue
            if any(h == file_hash for h, _, _ in previous):
                continue
            if previous and self.options.on_overwrite != "reprocess":
                continue
            if new >= self.remaining():
                break  # the file that stops the page
            new += 1
        return hashes

    def register(self, new: list[file_batches.NewFile]) -> list[int]:
        """Register the page's new files; returns the ids of the batches this scan made."""
        try:
            with transaction.atomic():
                return file_batches.register_files(
                    job=self.job, files=new, server_id=self.server_id, now=self.now
                )
        except IntegrityError:
            # A concurrent scan registered some of these meanwhile: settle them one by one.
            ids = []
            for f in new:
                batch, created = file_batches.register_file_once(
                    source_process_id=self.job.pk,
                    path=f.path,
                    file_size=f.file_size,
                    file_hash=f.file_hash,
                    creation_ts=f.creation_ts,
                    server_id=self.server_id,
                )
                if created:
                    ids.append(batch.pk)
            return ids

    def log(self, message_id: str, message: str) -> None:
        StepLogger(self.step, self.run_id)(message_id, message, "scan")

    def log_not_own(self, key: str, reason: str) -> None:
        self.log("not_own_file", f"{key}: passed over: {NOT_OWN[reason]}")

    def report(self) -> None:
        self.result.listed = self.storage.stats.keys_listed
        self.result.list_calls = self.storage.stats.list_calls
        if self.progress:
            self.progress(self.result)


def scan(
    step_id: int,
    *,
    reconcile: bool | None = None,
    storage: Storage | None = None,
    run_id: int | None = None,
    progress: Progress | None = None,
) -> ScanResult:
    """Scan the location of the ``ingest.scan`` step ``step_id`` and register what is new.

    ``reconcile`` forces (True) or prevents (False) the reconciliation listing; by default it
    runs every ``reconcile_every`` scans."""
    step = Process.objects.select_related("parent", "bus_domain").get(pk=step_id)
    if step.parent is None:
        raise ScanConfigError(f"{step.name} is a job; scan one of its steps")
    options = ScanOptions.of(step)
    state, _ = ScanState.objects.get_or_create(
        process=step, defaults={"location": options.location}
    )
    if state.location != options.location:
        # A new location: its keys have nothing to do with the old marker.
        ScanState.objects.filter(pk=state.pk).update(location=options.location, marker="")
        state.marker = ""
    if reconcile is None:
        reconcile = (
            bool(options.reconcile_every) and (state.scans + 1) % options.reconcile_every == 0
        )
    scanner = _Scanner(
        step=step,
        job=step.parent,
        options=options,
        storage=storage or options.open(),
        now=timezone.now(),
        run_id=run_id,
        result=ScanResult(marker=state.marker),
        progress=progress,
    )
    scanner.marker_scan(state.marker)
    if reconcile and not scanner.result.capped:
        scanner.reconcile(ScanState.objects.get(pk=state.pk).marker)
        ScanState.objects.filter(pk=state.pk).update(last_reconcile_ts=scanner.now)
    ScanState.objects.filter(pk=state.pk).update(scans=F("scans") + 1, last_scan_ts=scanner.now)
    scanner.report()
    return scanner.result


# --- the check before a run (docs/operations.md, "Quiet scans") ----------------------------


@dataclass
class CheckResult:
    """What a check of a scan step's location found: ``new`` counts the files a scan now
    would register, up to the first one (the check stops there: the run's scan lists the
    rest); ``not_ready`` the keys passed over this time (in flight, young, empty, unsafe, no
    file of the folder's own)."""

    step_id: int
    location: str
    after: str  # the marker the listing started after
    listed: int = 0
    list_calls: int = 0
    new: int = 0
    not_ready: int = 0
    reconciled: bool = False
    # why the keys not ready were passed over (a scan's counter -> keys), and when the first
    # of those younger than the minimum age will be old enough (ISO 8601, UTC)
    why_not_ready: dict[str, int] = field(default_factory=dict)
    ready_at: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def check(step_id: int, *, storage: Storage | None = None) -> CheckResult:
    """List the location of the ``ingest.scan`` step ``step_id`` as its scan would (after
    the marker, and below it when the reconciliation is due) and tell whether a scan now
    would register a file. Registers nothing and moves no marker: a file that appears after
    this listing is found by the run's scan or by the next check (``record_check``)."""
    step = Process.objects.select_related("parent", "bus_domain").get(pk=step_id)
    if step.parent is None:
        raise ScanConfigError(f"{step.name} is a job; check one of its steps")
    options = ScanOptions.of(step)
    state, _ = ScanState.objects.get_or_create(
        process=step, defaults={"location": options.location}
    )
    # A new location is listed from its start; the scan resets the marker itself.
    marker = state.marker if state.location == options.location else ""
    scanner = _Scanner(
        step=step,
        job=step.parent,
        options=options,
        storage=storage or options.open(),
        now=timezone.now(),
        run_id=None,
        result=ScanResult(marker=marker),
        progress=None,
    )
    found = CheckResult(step_id=step.pk, location=options.location, after=marker)
    for page in scanner.storage.pages(marker, options.page_size):
        if _count_new(scanner, page, found):
            break
    due = bool(options.reconcile_every) and (state.scans + 1) % options.reconcile_every == 0
    if not found.new and due:
        found.reconciled = True
        for page in scanner.storage.pages("", options.page_size):
            below = [o for o in page if o.key <= marker]
            if _count_new(scanner, below, found) or len(below) < len(page):
                break
    found.listed = scanner.storage.stats.keys_listed
    found.list_calls = scanner.storage.stats.list_calls
    return found


def _count_new(scanner: _Scanner, page: list[ObjectInfo], found: CheckResult) -> bool:
    """Count the page's keys that are not ready, and its first file a scan would register
    as it would decide (``register_page``); True once there is one."""
    ready = []
    for obj in page:
        reason = scanner.not_ready(obj)
        if reason is None:
            ready.append(obj)
        elif reason != "skipped_excluded":  # another step's file: not "not ready yet"
            found.not_ready += 1
            found.why_not_ready[reason] = found.why_not_ready.get(reason, 0) + 1
            if reason == "skipped_young":
                age = timedelta(seconds=scanner.options.min_age_seconds)
                at = (obj.last_modified + age).astimezone(UTC).isoformat()
                found.ready_at = min(found.ready_at or at, at)
    uris = {scanner.storage.uri_of(o.key): o for o in ready}
    known = scanner.registered(uris)
    for uri, obj in uris.items():
        previous = known.get(uri, [])
        if previous and (
            scanner.same_local_file(obj, previous) or scanner.options.on_overwrite != "reprocess"
        ):
            continue
        if previous:
            try:
                file_hash = scanner.storage.content_hash(obj)
            except NotOwnFile:
                continue  # replaced by a link since it was listed: the scan passes over it
            if any(h == file_hash for h, _, _ in previous):
                continue
        found.new += 1
        return True
    return False


def record_check(
    checks: list[CheckResult], *, outcome: str, detail: str, run_id: int | None, quiet: bool
) -> None:
    """Keep the check on each step's scan state, overwriting the previous one. A quiet
    check (it started no run) counts as a listing for the reconciliation cadence, so that a
    location where nothing new arrives is still reconciled every ``reconcile_every``; a
    check that starts a run does not, so that the run's scan reconciles when it was due."""
    now = timezone.now()
    for found in checks:
        fields: dict[str, object] = {
            "last_checked_ts": now,
            "last_check": {
                "outcome": outcome,
                "detail": detail,
                "run": run_id,
                **found.as_dict(),
            },
        }
        if quiet:
            fields |= {"quiet_checks": F("quiet_checks") + 1, "scans": F("scans") + 1}
            if found.reconciled:
                fields["last_reconcile_ts"] = now
        ScanState.objects.filter(process_id=found.step_id).update(**fields)
