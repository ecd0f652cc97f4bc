"""A model that keeps calling a tool outside its persona's subset, through `personae run`.

pydantic-ai counts every refusal of an unknown tool against the agent's
retries and ends the run with UnexpectedModelBehavior; the worker turns that
into a failed WorkerResult and a clear warning event, and the run finishes
(partial) without a traceback. The SCRIPTED model answers over loopback HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

PERSONA = """---
name: dev
description: Reads the sample project.
tools: [read_file, grep]
---
You are dev.
"""

SCENARIO = {
    "description": "a worker that only ever calls run_shell (scripted)",
    "steps": [{"when": {"role": "manager"},
               "output": {"subtasks": [{"description": "Read config"}]}}],
    "rules": [
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "run_shell", "args": {"command": "touch PWNED"}}]},
        {"when": {"role": "manager"}, "text": "SYNTHESIS"},
    ],
}  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "dev.md").write_text(PERSONA)
    (root / "config.yaml").write_text("port: 8081\n")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    return root


def test_repeated_disallowed_tool_is_a_worker_failure(project: Path) -> None:
    spec = f"scripted:{project.parent / 's.yaml'}"
    done = subprocess.run(
        [sys.executable, "-m", "personae", "run", "What port?", "--persona", "dev",
         "--model", spec, "--json", "--max-retries", "1"],
        check=False, cwd=project, capture_output=True, text=True, timeout=120,
        env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "UnexpectedModelBehavior" not in done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    stops = [e for e in events if e["data"].get("action") == "worker_stopped"]
    assert len(stops) == 2  # the first attempt and the one retry
    assert stops[0]["data"]["refused_tools"] == ["run_shell"]
    assert "kept calling 'run_shell'" in stops[0]["message"]
    assert "persona dev may not use (allowed: grep, read_file)" in stops[0]["message"]
    works = [e for e in events if e["kind"] == "work_result"]
    assert [w["data"]["success"] for w in works] == [False, False]
    assert works[0]["message"] == stops[0]["message"]
    refused = [e for e in events if e["kind"] == "tool_call"]
    assert refused and all(not e["data"]["ok"] for e in refused)
    assert {e["data"]["tool"] for e in refused} == {"run_shell"}
    final = events[-1]
    assert final["kind"] == "final" and final["data"]["status"] == "partial"
    assert final["data"]["not_validated"] == {"1": "skipped"}
    assert not (project / "PWNED").exists()  # the refused tool never ran
    listed = subprocess.run(
        [sys.executable, "-m", "personae", "runs", "list", "--json"],
        check=True, cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert json.loads(listed.stdout)[0]["status"] == "partial"
