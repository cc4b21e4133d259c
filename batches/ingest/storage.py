"""One listing interface over two kinds of storage: local folders and S3-compatible stores.

Both list keys in the same order (by code point, which is S3's UTF-8 byte order) and both
start strictly after a marker, page by page, so a scan reads only what is new.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

PAGE_SIZE = 1000


class StorageError(Exception):
    """The location cannot be read: bad URI, missing folder or bucket, refused credentials."""


# Why a local entry is not a file of the folder's own, by the counter a scan bumps for it. A
# hard link is another name of a file that may live in another team's folder (a team's path
# check sees only the name in its own), and a symbolic link, FIFO, socket or device is no
# file written into the folder (a FIFO would also hang the read that hashes it).
NOT_OWN = {
    "skipped_hard_link": (
        "a hard link: the file has other names, maybe in another team's folder; copy the file "
        "into the folder instead of linking it"
    ),
    "skipped_not_regular": (
        "not a regular file (a symbolic link, FIFO, socket or device): only files written "
        "into the folder are read"
    ),
}


def not_own(st: os.stat_result) -> str | None:
    """Why the local entry of ``st`` (from ``lstat`` or ``fstat``, never a ``stat`` that
    follows a link) is not the folder's own file (a key of :data:`NOT_OWN`), or None."""
    if not stat.S_ISREG(st.st_mode):
        return "skipped_not_regular"
    if st.st_nlink > 1:
        return "skipped_hard_link"
    return None


class NotOwnFile(StorageError):
    """A local file that turned out, when opened, not to be the folder's own."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {NOT_OWN[reason]}")
        self.reason = reason  # a key of NOT_OWN


@dataclass(frozen=True)
class ObjectInfo:
    key: str  # relative to the location, '/'-separated
    size: int
    last_modified: datetime
    etag: str | None = None  # S3's ETag; None where the content hash must be computed
    not_own: str | None = None  # a local entry that is no file of the folder's own (NOT_OWN)


@dataclass
class ListingStats:
    list_calls: int = 0
    keys_listed: int = 0


class Storage(Protocol):
    stats: ListingStats

    @property
    def uri(self) -> str: ...

    def pages(
        self, start_after: str = "", page_size: int = PAGE_SIZE
    ) -> Iterator[list[ObjectInfo]]:
        """Keys strictly after ``start_after``, in key order, ``page_size`` at a time."""
        ...

    def uri_of(self, key: str) -> str: ...

    def content_hash(self, obj: ObjectInfo) -> str: ...


@dataclass
class LocalStorage:
    root: Path
    stats: ListingStats = field(default_factory=ListingStats)

    @property
    def uri(self) -> str:
        return self.root.as_uri()

    def uri_of(self, key: str) -> str:
        return (self.root / key).as_uri()

    def pages(
        self, start_after: str = "", page_size: int = PAGE_SIZE
    ) -> Iterator[list[ObjectInfo]]:
        if not self.root.is_dir():
            raise StorageError(f"{self.uri} is not a readable folder")
        page: list[ObjectInfo] = []
        for obj in self._walk("", start_after):
            page.append(obj)
            if len(page) == page_size:
                yield page
                page = []
        if page:
            yield page

    def _walk(self, prefix: str, start_after: str) -> Iterator[ObjectInfo]:
        self.stats.list_calls += 1
        with os.scandir(self.root / prefix if prefix else self.root) as entries:
            # Sort as S3 would sort the full keys: a folder's keys all start with "name/".
            ordered = sorted(
                ((e.name + "/" if e.is_dir(follow_symlinks=False) else e.name), e) for e in entries
            )
        for sort_name, entry in ordered:
            key = prefix + sort_name
            if sort_name.endswith("/"):
                # Skip a whole folder whose keys all sort at or before the marker.
                if key <= start_after and not start_after.startswith(key):
                    continue
                yield from self._walk(key, start_after)
                continue
            if key <= start_after:
                continue
            # The entry itself (lstat): a symbolic link is listed as one, never followed.
            st = entry.stat(follow_symlinks=False)
            self.stats.keys_listed += 1
            yield ObjectInfo(
                key=key,
                size=st.st_size,
                last_modified=datetime.fromtimestamp(st.st_mtime, tz=UTC),
                not_own=not_own(st),
            )

    def content_hash(self, obj: ObjectInfo) -> str:
        """The file's MD5, read from the file checked as the folder's own once opened: the
        entry may have been replaced since it was listed (by a link, a FIFO). Opened without
        following a link and without blocking on a FIFO, then checked by ``fstat`` of what was
        opened, so no later swap changes what is read: :class:`NotOwnFile` if it is not."""
        path = self.root / obj.key
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
                raise NotOwnFile(path.as_uri(), "skipped_not_regular") from exc
            raise
        with open(fd, "rb") as f:
            reason = not_own(os.fstat(f.fileno()))
            if reason is not None:
                raise NotOwnFile(path.as_uri(), reason)
            digest = hashlib.md5(usedforsecurity=False)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()


@dataclass
class S3Storage:
    bucket: str
    prefix: str
    client: Any  # a boto3 S3 client (boto3 ships no types)
    stats: ListingStats = field(default_factory=ListingStats)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def uri_of(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def pages(
        self, start_after: str = "", page_size: int = PAGE_SIZE
    ) -> Iterator[list[ObjectInfo]]:
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix,
            "MaxKeys": page_size,
        }
        if start_after:
            kwargs["StartAfter"] = self.prefix + start_after
        while True:
            try:
                self.stats.list_calls += 1
                response = self.client.list_objects_v2(**kwargs)
            except (BotoCoreError, ClientError) as exc:
                raise StorageError(f"cannot list {self.uri}: {exc}") from exc
            page = [
                ObjectInfo(
                    key=item["Key"][len(self.prefix) :],
                    size=item["Size"],
                    last_modified=item["LastModified"],
                    etag=item.get("ETag", "").strip('"') or None,
                )
                for item in response.get("Contents", [])
            ]
            self.stats.keys_listed += len(page)
            if page:
                yield page
            if not response.get("IsTruncated"):
                return
            kwargs.pop("StartAfter", None)
            kwargs["ContinuationToken"] = response["NextContinuationToken"]

    def content_hash(self, obj: ObjectInfo) -> str:
        return obj.etag or ""


def s3_client(
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 5, "mode": "standard"},
        max_pool_connections=32,
        s3={"addressing_style": "path"} if endpoint_url else {},
    )
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url or None,
        region_name=region or None,
        aws_access_key_id=access_key or None,
        aws_secret_access_key=secret_key or None,
        config=config,
    )


def open_storage(location: str, *, client: Any = None, **s3_options: str | None) -> Storage:
    """``file:///abs/dir`` or ``s3://bucket/prefix``."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise StorageError(f"{location}: only local file URIs (file:///abs/dir) are supported")
        return LocalStorage(Path(unquote(parsed.path)))
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise StorageError(f"{location}: no bucket")
        prefix = parsed.path.lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return S3Storage(parsed.netloc, prefix, client or s3_client(**s3_options))
    raise StorageError(f"{location}: unsupported location (use file:///... or s3://...)")
