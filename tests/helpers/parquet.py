"""Parquet files as a step leaves them, written without Spark (pyarrow)."""

from __future__ import annotations

from pathlib import Path


def write_parquet(path: Path, rows: list[dict], group: int | None = None) -> Path:
    """``rows`` (dicts with the same keys) as one Parquet file at ``path``, in row groups of
    ``group`` rows (pyarrow's default: one group)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=group)
    return path
