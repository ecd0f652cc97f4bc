"""docs/runs.md's worked example runs as written: the bundled chain, its second step replayed
against another scenario from call 2 on, compared and diffed (shell block, then Python)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models import override_allow_model_requests

pytestmark = pytest.mark.process  # the chain's steps are child processes

DOC = Path(__file__).resolve().parents[1] / "docs" / "runs.md"


def _block(kind: str) -> str:
    [block] = re.findall(rf"^```{kind}\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)
    return str(block)


def test_the_worked_example_runs_as_documented(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # `personae` and `python` as the doc uses them, on this interpreter (and this checkout)
    script = (
        'personae() { "$PY" -m personae "$@"; }\npython() { "$PY" "$@"; }\nset -eu\n'
        + _block("sh")
        + 'echo "REPORT=$REPORT"\necho "REPLAY=$REPLAY"\n'
    )
    env = {**os.environ, "PY": sys.executable}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    shown = [line for line in _block("text").splitlines() if "run-" not in line]
    for line in shown:  # every line the doc shows, but the ids
        assert line in out.splitlines(), f"{line!r} not in the output:\n{out}"
    ids = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("RE"))
    report, replay = ids["REPORT"], ids["REPLAY"]
    assert f"run {replay} (done) replays {report}" in out
    assert "call 1: same" in out and "from the record (call 1)" in out
    assert "call 2: differs" in out and "confidence medium" in out
    assert "first difference: call 2" in out
    assert "total +0 tokens; 0 of " in out  # call 1 saw what the original's call 1 saw
    assert "@@ (instructions): changed" in out  # the manager's and the validator's roles
    chain = tmp_path / "sales-chain"
    assert "Total revenue: 12900" in (chain / "report.md").read_text()  # the original's
    # The Python block of the doc, on the same project.
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"report_run": report}
    with override_allow_model_requests(True):
        exec(compile(_block("python"), "docs/runs.md python block", "exec"), namespace)
    again = namespace["replay"]
    assert again.status == "done" and again.link.of == report
    listed = subprocess.run([sys.executable, "-m", "personae", "runs", "list", "--json"],
                            cwd=chain, capture_output=True, text=True, check=True)  # fmt: skip
    replays = [r for r in json.loads(listed.stdout) if r["replay_of"] == report]
    assert len(replays) == 2
