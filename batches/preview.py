"""A look at a table's rows: the first rows of one of its partitions, as its Parquet files hold
them (the table page's preview, the API's ``tables/{id}/preview/``).

Which partitions a user may look at is the selectors' decision (``selectors.table_partitions``
of a table ``selectors.tables`` lets him see); this module only reads. It runs no query and
takes no SQL from anyone, so there is nothing for the Spark SQL sandbox to check: it reads the
files' footers, then the first row group of each file in turn until it has the rows it was
asked for. What it reads is bounded: at most :data:`MAX_ROWS` rows, each value cut to
:data:`MAX_TEXT` characters, and an object store's reads in pieces of :data:`READ_BYTES`."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from batches import partitions
from batches.models import Partition
from bdre.errors import BdreError, Code

if TYPE_CHECKING:
    import pyarrow.parquet as pq

DEFAULT_ROWS = 20
MAX_ROWS = 200
MAX_TEXT = 300  # characters of a value shown; a nested value is shown as JSON
READ_BYTES = 1 << 20  # an object store's file is read in ranges this long (pages are ~1 MB)


@dataclass
class Preview:
    partition: Partition
    columns: list[tuple[str, str]]  # name, Parquet's type
    rows: list[list[str]] = field(default_factory=list)
    more: bool = False  # the partition holds more rows than these


def preview(partition: Partition, rows: int = DEFAULT_ROWS) -> Preview:
    """The first ``rows`` rows (1 to :data:`MAX_ROWS`) of ``partition``'s files, in the
    order of their names. A partition whose files are gone (replaced and removed after the
    grace period, a failed attempt reaped) or unreadable is refused with the reason."""
    if not 1 <= rows <= MAX_ROWS:
        raise ValueError(f"rows: from 1 to {MAX_ROWS}, not {rows}")
    if partition.removed_at is not None:
        raise BdreError(
            Code.PARTITION_UNREADABLE,
            f"the files of batch {partition.batch_id}'s partition were removed "
            f"{partition.removed_at:%Y-%m-%d %H:%M} UTC ({partition.get_state_display().lower()})",
        )
    try:
        files = _files(partition.location)
    except _store_errors() as exc:
        raise _unreadable(partition, "its folder could not be listed", exc) from exc
    # pyarrow's errors: ArrowInvalid (not Parquet, a truncated file) is a ValueError, an
    # unknown codec a NotImplementedError, a type it cannot convert a TypeError.
    unreadable: tuple[type[Exception], ...] = (
        *_store_errors(),
        ValueError,
        TypeError,
        NotImplementedError,
    )
    shown: Preview | None = None
    for name, opener in files:
        try:
            with opener() as handle:
                shown = _read(partition, handle, rows, shown)
        except unreadable as exc:
            raise _unreadable(partition, f"{name} is not a readable Parquet file", exc) from exc
        if shown.more:
            break
    if shown is None:
        # An empty batch writes no data file, only Spark's _SUCCESS.
        return Preview(partition, [])
    return shown


def _read(partition: Partition, handle: Any, limit: int, shown: Preview | None) -> Preview:
    import pyarrow.parquet as pq

    # Column chunks read as a stream, page by page, not each buffered whole beforehand: a
    # row group Spark wrote can be 128 MB, the first rows are in its first pages.
    parquet = pq.ParquetFile(handle, pre_buffer=False, buffer_size=READ_BYTES)
    if shown is None:
        shown = Preview(partition, _columns(parquet))
    for group in range(parquet.num_row_groups):
        wanted = limit - len(shown.rows)
        if wanted <= 0:
            shown.more = True
            break
        for batch in parquet.iter_batches(batch_size=wanted, row_groups=[group]):
            columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            shown.rows += [[_text(c[i]) for c in columns] for i in range(batch.num_rows)]
            if parquet.metadata.row_group(group).num_rows > batch.num_rows:
                shown.more = True
            break
        if shown.more:
            break
    return shown


def _columns(parquet: pq.ParquetFile) -> list[tuple[str, str]]:
    schema = parquet.schema_arrow
    return [(f.name, str(f.type)) for f in schema]


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=_plain, ensure_ascii=False)
    elif isinstance(value, datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, bytes):
        text = value[: MAX_TEXT // 2].hex() + ("…" if len(value) > MAX_TEXT // 2 else "")
    else:
        text = str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _plain(value: Any) -> str:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)


def _files(location: str) -> list[tuple[str, Any]]:
    """The partition's data files, by name, each with a way to open it for reading."""
    if urlparse(location).scheme in ("s3", "s3a"):
        folder = partitions._s3_folder(location)
        return [
            (key, _s3_opener(folder.client, folder.bucket, folder.prefix + key, size))
            for key, size in partitions.data_files(location, folder)
        ]
    root = partitions._local(location)
    if not root.is_dir():
        raise FileNotFoundError(f"{location}: no such folder")
    return [(name, _local_opener(root / name)) for name, _ in partitions.data_files(location)]


def _local_opener(path: Path) -> Any:
    return lambda: path.open("rb")


def _s3_opener(client: Any, bucket: str, key: str, size: int) -> Any:
    return lambda: io.BufferedReader(_S3Object(client, bucket, key, size), READ_BYTES)


class _S3Object(io.RawIOBase):
    """An object read in ranges: a Parquet reader seeks to the footer, then to the column
    chunks of one row group, and never needs the whole file."""

    def __init__(self, client: Any, bucket: str, key: str, size: int):
        self._client, self._bucket, self._key, self._size = client, bucket, key, size
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = max(0, base + offset)
        return self._at

    def readinto(self, buffer: Any) -> int:
        if self._at >= self._size or not len(buffer):
            return 0
        end = min(self._size, self._at + len(buffer)) - 1
        answer = self._client.get_object(
            Bucket=self._bucket, Key=self._key, Range=f"bytes={self._at}-{end}"
        )
        data = answer["Body"].read()
        buffer[: len(data)] = data
        self._at += len(data)
        return len(data)


def _store_errors() -> tuple[type[Exception], ...]:
    """What a listing or a read of the partition's store raises when it cannot answer: a
    missing folder, refused credentials, an endpoint down, an object deleted meanwhile."""
    from botocore.exceptions import BotoCoreError, ClientError

    from batches.ingest.storage import StorageError

    return (OSError, StorageError, BotoCoreError, ClientError)


def _unreadable(partition: Partition, why: str, exc: Exception) -> BdreError:
    # The reason, not the library's text nor the attempt's folder (pages show neither).
    return BdreError(
        Code.PARTITION_UNREADABLE,
        f"batch {partition.batch_id}'s partition: {why} ({type(exc).__name__})",
    )
