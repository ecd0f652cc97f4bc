"""The two-persona chain example runs end to end through the CLI on the scripted replay server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import yaml

from _helpers import run_personae


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


def test_handover_run_end_to_end_with_personae_run(tmp_path: Path) -> None:
    """create -> `handover run` spawns `personae run --context-from` -> results written back."""
    example = Path(str(resources.files("personae.examples") / "chain"))
    root = tmp_path / "proj"
    shutil.copytree(example, root)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_personae(*args, cwd=root, timeout=300)

    created = cli(
        "handover", "create", "--from", "data-analyst", "--to", "report-writer",
        "--task", "Write report.md from the figures.",
        "--file", "data/sales.csv:data:sales", "--insight", "total revenue 12900",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    path = Path(created.stdout.strip())
    ran = cli("handover", "run", str(path), "--model", "scripted:report.scenario.yaml")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("success:")
    saved = json.loads(path.read_text())
    assert saved["results"]["status"] == "success"
    assert "12900" in saved["results"]["output"]
    assert (root / "report.md").exists()
    # A wrong persona name is usage (exit 2): refused when the file is made, and, in a file
    # made with --no-target-check, before any child starts (nothing run, no results saved).
    refused = cli("handover", "create", "--to", "no-such-persona", "--task", "x")
    assert refused.returncode == 2 and "not in this project's cast" in refused.stderr
    other = cli("handover", "create", "--to", "report-writr", "--task", "x", "--no-target-check")
    before = Path(other.stdout.strip()).read_bytes()
    bad = cli("handover", "run", other.stdout.strip(), "--retries", "0", "--timeout", "60",
              "--model", "scripted:report.scenario.yaml")  # fmt: skip
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert (
        bad.stderr.count("\n") == 1
        and "target.persona: unknown persona 'report-writr'" in (bad.stderr)
        and "did you mean 'report-writer'" in bad.stderr
        and "attempt" not in bad.stderr
    )
    assert Path(other.stdout.strip()).read_bytes() == before


def test_chain_run_from_the_project_directory_keeps_pwd_and_redacts_secrets(
    tmp_path: Path,
) -> None:
    """`cd proj && personae chain run workflow.yaml` as a shell starts it (PWD=proj).

    ``$PWD`` (and ``$OLDPWD``) equal the working directory; they are not secrets,
    so the handovers keep ``source.workingDirectory``. A secret-named variable's
    value is still redacted from the handover written and the ledger.
    """
    example = Path(str(resources.files("personae.examples") / "chain"))
    root = tmp_path / "proj"
    shutil.copytree(example, root)
    secret = "dpl-7Qm2xV9rT4kL8wZ1"  # no credential shape: only the variable's name tells
    spec = yaml.safe_load((root / "workflow.yaml").read_text())
    spec["steps"] = spec["steps"][:1]
    spec["steps"][0]["insights"] = [f"deploy with {secret}"]
    (root / "workflow.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PWD": str(root), "OLDPWD": str(tmp_path), "DEPLOY_TOKEN": secret}
    out = run_personae("chain", "run", "workflow.yaml", cwd=root, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "| analyse | data-analyst | success | 1 |" in out.stdout
    saved = root / ".personae" / "chains" / "sales-report" / "handovers" / "analyse.json"
    handover = json.loads(saved.read_text())
    assert handover["source"]["workingDirectory"] == str(root)
    assert handover["artifacts"]["insights"] == ["deploy with [REDACTED:env:DEPLOY_TOKEN]"]
    assert handover["results"]["status"] == "success"
    for stored in [saved, *(root / ".personae").glob("state.db*")]:
        assert secret.encode() not in stored.read_bytes(), stored
