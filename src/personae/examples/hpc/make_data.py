"""Write ``data/sensors.h5``, the example's HDF5 file (one hour of 1 Hz sensor readings).

Run it once in a copy of the example: ``python make_data.py`` (needs h5py and numpy:
``pip install 'personae[science]'``). The numbers are made up but deterministic.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SAMPLES", "make_data"]

SAMPLES = 3600
"""One hour at 1 Hz."""


def make_data(folder: Path) -> Path:
    """Write ``folder/data/sensors.h5`` and return its path."""
    import h5py  # the science extra
    import numpy as np

    path = folder / "data" / "sensors.h5"
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(SAMPLES, dtype=np.int64)
    day = np.sin(2 * np.pi * t / SAMPLES)
    with h5py.File(path, "w") as fh:
        fh.attrs["sampling_hz"] = 1
        fh.create_dataset("time", data=t)
        sensors = fh.create_group("sensors")
        sensors.create_dataset("temperature", data=(21.0 + 3.0 * day).astype(np.float32))
        sensors.create_dataset("pressure", data=(1013.0 + 0.5 * day).astype(np.float32))
        sensors.create_dataset("humidity", data=(40.0 - 5.0 * day).astype(np.float32))
    return path


if __name__ == "__main__":
    print(make_data(Path(__file__).resolve().parent))
