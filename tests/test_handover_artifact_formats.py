"""Artifact format detection and summaries with the real libraries (h5py, netCDF4, scipy's
reader is not needed when netCDF4 is there, pyarrow), on small files made here; a handover
written through the CLI carries them to the receiver's context."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from _helpers import run_personae
from personae.handover import ContextHandover
from personae.handover._render import render_section
from personae.handover.artifact_formats import MAX_SUMMARY_CHARS, detect_format, summarize

try:
    import h5py
    import netCDF4
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as exc:  # a missing extra fails loudly, never a silent skip
    raise ImportError(
        f"{exc}: install the science extra (source scripts/setup.d/75-science.sh, or "
        "pip install -e '.[science]')"
    ) from exc


def _hdf5(path: Path) -> Path:
    with h5py.File(path, "w") as fh:
        grp = fh.create_group("sim")
        grp.create_dataset("temperature", data=np.zeros((4, 3), dtype="float32"))
        fh.create_dataset("steps", data=np.arange(10, dtype="int64"))
    return path


def _netcdf(path: Path, fmt: str = "NETCDF4") -> Path:
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("time", 5)
        ds.createDimension("lat", 2)
        var = ds.createVariable("tas", "f4", ("time", "lat"))
        var[:] = np.ones((5, 2), dtype="float32")
    return path


def _parquet(path: Path) -> Path:
    table = pa.table({"region": ["n", "s", "e"], "revenue": [1.5, 2.0, 3.25]})
    pq.write_table(table, path, row_group_size=2)
    return path


def test_formats_are_detected_from_the_bytes(tmp_path: Path) -> None:
    assert detect_format(_hdf5(tmp_path / "run.h5")) == "hdf5"
    assert detect_format(_hdf5(tmp_path / "no-extension")) == "hdf5"
    assert detect_format(_netcdf(tmp_path / "climate.nc")) == "netcdf"  # NetCDF-4 is HDF5
    assert detect_format(_netcdf(tmp_path / "classic.data", "NETCDF3_CLASSIC")) == "netcdf"
    assert detect_format(_parquet(tmp_path / "sales.bin")) == "parquet"
    (tmp_path / "t.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    assert detect_format(tmp_path / "t.csv") == "csv"
    (tmp_path / "notes.txt").write_text("PAR1 but not parquet", encoding="utf-8")
    assert detect_format(tmp_path / "notes.txt") is None
    assert detect_format(tmp_path / "missing.h5") is None


def test_summaries_name_shapes_variables_and_columns(tmp_path: Path) -> None:
    h5 = summarize(_hdf5(tmp_path / "run.h5"))
    assert h5 is not None and "sim/temperature (4, 3) float32" in h5 and "steps (10,) int64" in h5
    nc = summarize(_netcdf(tmp_path / "climate.nc"))
    assert nc is not None and "time=5" in nc and "lat=2" in nc and "tas(time, lat)" in nc
    classic = summarize(_netcdf(tmp_path / "old.nc", "NETCDF3_CLASSIC"))
    assert classic is not None and "tas(time, lat)" in classic
    par = summarize(_parquet(tmp_path / "sales.parquet"))
    assert par is not None and "3 rows in 2 row group(s)" in par
    assert "region string" in par and "revenue double" in par
    (tmp_path / "t.csv").write_text("region,revenue\nn,1\ns,2\n", encoding="utf-8")
    assert summarize(tmp_path / "t.csv") == "CSV: 2 columns (region, revenue); 2 rows"
    (tmp_path / "broken.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    broken = summarize(tmp_path / "broken.h5")
    assert broken is not None and broken.startswith("hdf5: could not be summarized")
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"column_{i:04d}" for i in range(500)) + "\n", encoding="utf-8")
    assert len(summarize(wide) or "") <= MAX_SUMMARY_CHARS


def test_a_multi_gb_file_is_summarized_without_reading_it_whole(tmp_path: Path) -> None:
    big = tmp_path / "huge.csv"
    with big.open("wb") as fh:
        fh.write(b"id,value\n" + b"1,2\n" * 1000)
        fh.truncate(4 * 1024**3)  # 4 GiB, sparse: nothing past the first KiB is on disk
    started = time.process_time()
    text = summarize(big)
    assert time.process_time() - started < 2.0
    assert text is not None and "at least 1000 rows" in text and str(4 * 1024**3) in text


@pytest.mark.process
def test_handover_carries_format_and_summary_to_the_receiver(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    assert run_personae("init", cwd=root, timeout=120).returncode == 0
    _hdf5(root / "results.h5")
    created = run_personae(
        "handover", "create", "--from", "analyst", "--to", "writer", "--no-target-check",
        "--task", "Plot the temperature field.", "--file", "results.h5:data:simulation output",
        cwd=root, timeout=120,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    saved = json.loads(Path(created.stdout.strip()).read_text(encoding="utf-8"))
    [art] = saved["artifacts"]["files"]
    assert art["format"] == "hdf5" and "sim/temperature (4, 3) float32" in art["summary"]
    shown = run_personae("handover", "show", created.stdout.strip(), cwd=root, timeout=120)
    assert "[hdf5]" in shown.stdout and "sim/temperature" in shown.stdout
    context = render_section(ContextHandover.model_validate(saved))
    assert "contents: HDF5: 2 dataset(s)" in context
