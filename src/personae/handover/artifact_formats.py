"""Artifact format detection and a short summary of scientific files for the receiver.

:func:`detect_format` reads at most the first and last few bytes (HDF5's
signature, NetCDF's ``CDF`` magic, Parquet's ``PAR1`` at both ends) and the
name's extension (CSV, TSV). :func:`summarize` says what is inside without
reading the file whole: HDF5 (h5py) datasets with shape and dtype; NetCDF
(netCDF4, or scipy for classic files) dimensions and variables; Parquet
(pyarrow) rows, row groups and columns from the footer; CSV (standard library)
the header and a row count from the first MiB only. The libraries are the
optional ``science`` extra; without one the summary says which to install.
Every summary is at most :data:`MAX_SUMMARY_CHARS` characters.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["FORMATS", "MAX_SUMMARY_CHARS", "detect_format", "summarize"]

MAX_SUMMARY_CHARS = 600
"""Longest summary returned (longer ones are cut with an ellipsis)."""
FORMATS = ("hdf5", "netcdf", "parquet", "csv", "tsv")
"""Formats detected and summarized."""

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_NETCDF_EXT = (".nc", ".nc4", ".cdf", ".netcdf")
_CSV_BYTES = 1 << 20
_ITEMS = 12


def _head_tail(path: Path) -> tuple[bytes, bytes, int]:
    with path.open("rb") as fh:
        head = fh.read(8)
        size = os.fstat(fh.fileno()).st_size
        tail = b""
        if size >= 12:
            fh.seek(size - 4)
            tail = fh.read(4)
    return head, tail, size


def detect_format(path: Path) -> str | None:
    """The file's format among :data:`FORMATS`, ``None`` when unknown or unreadable."""
    try:
        head, tail, _ = _head_tail(path)
    except OSError:
        return None
    suffix = path.suffix.lower()
    if head.startswith(_HDF5_MAGIC):  # NetCDF-4 files are HDF5 files too
        return "netcdf" if suffix in _NETCDF_EXT else "hdf5"
    if head[:3] == b"CDF" and head[3:4] in (b"\x01", b"\x02", b"\x05"):
        return "netcdf"
    if head[:4] == b"PAR1" and tail == b"PAR1":
        return "parquet"
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    return None


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1] + "…"


def _hdf5(path: Path) -> str:
    # local import: optional extra (personae[science]), loaded only for an HDF5 artifact
    import h5py

    found: list[str] = []

    def visit(name: str, item: Any) -> None:
        if isinstance(item, h5py.Dataset) and len(found) < _ITEMS:
            found.append(f"{name} {tuple(item.shape)} {item.dtype}")

    with h5py.File(path, "r") as fh:
        fh.visititems(visit)
        groups = len([k for k in fh if isinstance(fh[k], h5py.Group)])
    return f"HDF5: {len(found)} dataset(s) ({groups} top-level group(s)): " + "; ".join(found)


def _netcdf(path: Path) -> str:
    try:
        # local import: optional extra (personae[science]), loaded only for a NetCDF artifact
        import netCDF4
    except ImportError:
        return _netcdf_scipy(path)
    with netCDF4.Dataset(path, "r") as ds:
        dims = ", ".join(f"{n}={len(d)}" for n, d in list(ds.dimensions.items())[:_ITEMS])
        names = list(ds.variables.items())[:_ITEMS]
        variables = "; ".join(f"{n}({', '.join(v.dimensions)}) {v.dtype}" for n, v in names)
    return f"NetCDF: dimensions {dims}; variables {variables}"


def _netcdf_scipy(path: Path) -> str:
    # local import: scipy reads classic NetCDF when netCDF4 is not installed
    from scipy.io import netcdf_file

    with netcdf_file(path, "r", mmap=False) as ds:
        dims = ", ".join(f"{n}={d}" for n, d in list(ds.dimensions.items())[:_ITEMS])
        names = list(ds.variables.items())[:_ITEMS]
        variables = "; ".join(f"{n}({', '.join(v.dimensions)})" for n, v in names)
    return f"NetCDF: dimensions {dims}; variables {variables}"


def _parquet(path: Path) -> str:
    # local import: optional extra (personae[science]), loaded only for a Parquet artifact
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata  # the footer only
    schema = meta.schema.to_arrow_schema()
    columns = "; ".join(f"{f.name} {f.type}" for f in list(schema)[:_ITEMS])
    return (
        f"Parquet: {meta.num_rows} rows in {meta.num_row_groups} row group(s), "
        f"{meta.num_columns} column(s): {columns}"
    )


def _delimited(path: Path, delimiter: str) -> str:
    with path.open("rb") as fh:
        chunk = fh.read(_CSV_BYTES + 1)
        size = os.fstat(fh.fileno()).st_size
    whole = len(chunk) <= _CSV_BYTES
    text = chunk[:_CSV_BYTES].decode("utf-8", errors="replace")
    if not whole:
        text = text[: text.rfind("\n") + 1]  # complete lines only
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows:
        return "CSV: empty"
    header, body = rows[0], [r for r in rows[1:] if r]
    count = f"{len(body)} rows"
    if not whole:
        count = f"at least {len(body)} rows (counted in the first MiB of {size} bytes)"
    columns = ", ".join(header[:_ITEMS]) + (" …" if len(header) > _ITEMS else "")
    return f"{'TSV' if delimiter == chr(9) else 'CSV'}: {len(header)} columns ({columns}); {count}"


_SUMMARIZERS: dict[str, tuple[Callable[[Path], str], str]] = {
    "hdf5": (_hdf5, "h5py"),
    "netcdf": (_netcdf, "netCDF4 or scipy"),
    "parquet": (_parquet, "pyarrow"),
    "csv": (lambda p: _delimited(p, ","), ""),
    "tsv": (lambda p: _delimited(p, "\t"), ""),
}


def summarize(path: Path, fmt: str | None = None) -> str | None:
    """A short summary of ``path`` (format detected unless given); ``None`` for a format
    personae does not summarize. A missing library or an unreadable file is said in the
    summary, never raised."""
    fmt = (fmt or detect_format(path) or "").lower()
    entry = _SUMMARIZERS.get(fmt)
    if entry is None:
        return None
    summarizer, library = entry
    try:
        return _cut(summarizer(path))
    except ImportError:
        return f"{fmt}: no summary (install {library}: pip install 'personae[science]')"
    except Exception as exc:  # a damaged file must not stop a handover
        return _cut(f"{fmt}: could not be summarized: {type(exc).__name__}: {exc}")
