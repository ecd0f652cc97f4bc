"""The two-persona chain example runs end to end through the CLI on the scripted model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path


def test_example_chain_runs_from_docs(tmp_path: Path) -> None:
    example = Path(str(resources.files("personae.examples") / "chain"))
    root = tmp_path / "sales-chain"
    shutil.copytree(example, root)
    out = subprocess.run(
        [sys.executable, "-m", "personae", "chain", "run", "workflow.yaml"],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# Chain sales-report: success" in out.stdout
    assert "| analyse | data-analyst | success | 1 |" in out.stdout
    report = (root / "report.md").read_text()
    assert "Total revenue: 12900" in report and "North: 8000" in report
    state = root / ".personae" / "chains" / "sales-report"
    handover = json.loads((state / "handovers" / "report.json").read_text())
    assert handover["source"]["persona"] == "data-analyst"
    assert handover["context"]["history"][0]["persona"] == "data-analyst"
    assert "12900" in handover["context"]["history"][0]["summary"]
    assert handover["results"]["status"] == "success"
    again = subprocess.run(
        [sys.executable, "-m", "personae", "chain", "run", "workflow.yaml", "--resume"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert again.returncode == 0
    assert "| report | report-writer | success (resumed) |" in again.stdout
    ledger = subprocess.run(
        [sys.executable, "-m", "personae", "handover", "ledger"],
        cwd=root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "data-analyst -> report-writer" in ledger.stdout
    assert "chain -> data-analyst" in ledger.stdout
