"""The HPC example chain end to end on the scripted replay server: a data expert hands an
HDF5 file (made here with the real h5py) to an analysis expert, and an HPC expert hands
the job's SLURM variables to a workflow expert. Each receiver's scripted answers match
only when what was handed over is in its prompt; the handover files and the rendered
handover sections are checked too."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from _helpers import child_env
from personae.handover import runflow

SLURM = {
    "SLURM_JOB_ID": "4242",
    "SLURM_NTASKS": "128",
    "SLURM_JOB_PARTITION": "compute",
    "SLURM_JOB_NUM_NODES": "4",
    "SLURM_CPUS_PER_TASK": "1",
}
DATASETS = (
    "sensors/humidity (3600,) float32; sensors/pressure (3600,) float32; "
    "sensors/temperature (3600,) float32; time (3600,) int64"
)


def make_data(root: Path) -> Path:
    """The example's own ``make_data.py``, run as the README says (real h5py)."""
    spec = importlib.util.spec_from_file_location("hpc_make_data", root / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path: Path = module.make_data(root)
    return path


@pytest.mark.process
def test_hpc_chain_hands_over_an_hdf5_summary_and_the_slurm_allocation(tmp_path: Path) -> None:
    example = Path(str(resources.files("personae.examples") / "hpc"))
    root = tmp_path / "hpc-chain"
    shutil.copytree(example, root)
    # Nothing binary is shipped: the data is made here, and stays small.
    assert not list(example.rglob("*.h5"))
    data = make_data(root)
    assert data.stat().st_size < 200_000
    env = child_env(SLURM, drop=[k for k in os.environ if k.startswith("SLURM_")])
    out = subprocess.run(
        [sys.executable, "-m", "personae", "chain", "run", "workflow.yaml"],
        cwd=root, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# Chain hpc-handovers: success" in out.stdout
    for row in ("| inspect | data-expert | success |", "| allocation | hpc-expert | success |",
                "| analyse | analysis-expert | success |",
                "| workflow | workflow-expert | success |"):  # fmt: skip
        assert row in out.stdout, out.stdout
    handovers = root / ".personae" / "chains" / "hpc-handovers" / "handovers"

    # (a) data expert -> analysis expert: the HDF5 file's format and contents travel.
    analyse = json.loads((handovers / "analyse.json").read_text())
    assert analyse["source"]["persona"] == "data-expert"
    (h5,) = [f for f in analyse["artifacts"]["files"] if f["path"] == "data/sensors.h5"]
    assert h5["format"] == "hdf5"
    assert h5["summary"] == f"HDF5: 4 dataset(s) (1 top-level group(s)): {DATASETS}"
    assert analyse["artifacts"]["data"]["variables"] == ["temperature", "pressure", "humidity"]
    assert analyse["results"]["status"] == "success"
    plan = (root / "analysis-plan.md").read_text()
    assert "sensors/temperature" in plan and "(3600,)" in plan

    # (b) HPC expert -> workflow expert: the job's SLURM variables travel.
    workflow = json.loads((handovers / "workflow.json").read_text())
    assert workflow["source"]["persona"] == "hpc-expert"
    assert workflow["source"]["environment"] == SLURM
    assert "128 tasks" in workflow["context"]["history"][0]["summary"]
    assert workflow["results"]["status"] == "success"
    script = (root / "submit.sbatch").read_text()
    assert "#SBATCH --partition=compute" in script and "#SBATCH --ntasks=128" in script

    # What each receiver's context got: the rendered handover section.
    seen = {
        step: runflow.begin(
            handovers / f"{step}.json",
            None,
            cwd=root,
            non_interactive=True,
            environ={},
            ledger_db=None,
        ).section_text
        for step in ("analyse", "workflow")
    }
    assert f"contents: HDF5: 4 dataset(s) (1 top-level group(s)): {DATASETS}" in seen["analyse"]
    for name, value in SLURM.items():
        assert f"- {name}={value}" in seen["workflow"]
