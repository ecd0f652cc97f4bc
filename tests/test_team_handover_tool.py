"""`handover_to_persona` inside `personae run`, and result artifacts, as real subprocesses.

The parent `personae run` and the child it spawns each start the SCRIPTED replay
OpenAI-compatible server on 127.0.0.1 (not a real language model): every
model call crosses loopback HTTP. The child is a separate `personae run
--context-from ...` process started by the tool.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from _helpers import VALIDATOR_OK as OK
from _helpers import ProjectFactory, personae_cli
from personae.handover.child import ChildOptions
from personae.handover.tool import handover_to_persona

LEAD = """---
name: lead
description: Plans the work and hands writing to the writer.
tools: [read_file, handover_to_persona]
---
You are lead.
"""

PLAIN = """---
name: plain
description: May only read.
tools: [read_file]
---
You are plain.
"""

WRITER = """---
name: writer
description: Writes reports.
tools: [write_file, read_file]
model: scripted:{child}
---
You are writer.
"""


def handover_call(wait: bool) -> dict[str, Any]:
    args = {"target_persona": "writer", "task": "CHILDJOB write report.md",
            "insights": ["revenue 12900"], "wait_for_results": wait}  # fmt: skip
    return {"name": "handover_to_persona", "args": args}


def parent_scenario(wait: bool) -> dict[str, Any]:
    """Parent steps (matched on PARENTJOB) + rules the child's manager/validator use."""
    plan = {"subtasks": [{"description": "Hand the report to writer"}]}
    return {
        "description": "handover tool inside personae run (scripted)",
        "steps": [
            {"when": {"role": "manager", "contains": "PARENTJOB"}, "output": plan},
            {"when": {"role": "worker"}, "tool_calls": [handover_call(wait)]},
            {"when": {"role": "worker"}, "text": "The writer took the report."},
            {"when": {"role": "validator"}, "output": OK},
            {"when": {"role": "manager"}, "text": "PARENT-ANSWER"},
        ],
        "rules": [
            {"when": {"role": "manager", "contains": "<validated_work"},
             "text": "CHILD-ANSWER report.md written"},
            {"when": {"role": "manager", "contains": "CHILDJOB"},
             "output": {"subtasks": [{"description": "Write report.md"}]}},
            {"when": {"role": "validator"}, "output": OK},
        ],
    }  # fmt: skip


CHILD_WORKER = {
    "description": "the writer's worker (scripted)",
    "steps": [
        {"tool_calls": [{"name": "write_file",
                         "args": {"path": "report.md", "content": "# Report\n12900\n"}}]},
        {"text": "report.md written"},
    ],
}  # fmt: skip


@pytest.fixture
def project(
    tmp_path: Path,
    offline_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    project_factory: ProjectFactory,
) -> Path:
    monkeypatch.delenv("PERSONAE_HANDOVER_DEPTH", raising=False)
    child = tmp_path / "child.yaml"
    scenarios = {
        "child": CHILD_WORKER,
        "wait": parent_scenario(True),
        "later": parent_scenario(False),
    }
    personas = {"lead": LEAD, "plain": PLAIN, "writer": WRITER.format(child=child)}
    return project_factory(personas, scenarios=scenarios)


def run(
    cwd: Path, *args: str, env: dict[str, str] | None = None, code: int = 0
) -> list[dict[str, Any]]:
    """``personae run ARGS --json``'s events; it must exit ``code`` (5: partial)."""
    done = personae_cli("run", *args, "--json", cwd=cwd, env=env, timeout=180)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def handover_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "tool_call"
            and e["data"]["tool"] == "handover_to_persona"]  # fmt: skip


@pytest.mark.process
def test_persona_hands_work_to_another_and_waits(project: Path) -> None:
    spec = f"scripted:{project.parent / 'wait.yaml'}"
    events = run(project, "PARENTJOB get the report written", "--persona", "lead",
                 "--model", spec)  # fmt: skip
    calls = handover_events(events)
    assert len(calls) == 1 and calls[0]["data"]["ok"], calls
    assert events[-1]["message"] == "PARENT-ANSWER"
    assert events[-1]["data"]["status"] == "done"
    # The child process really ran as writer and wrote the file.
    assert (project / "report.md").read_text() == "# Report\n12900\n"
    files = list((project / ".personae" / "handovers").glob("*.json"))
    assert len(files) == 1
    body = json.loads(files[0].read_text())
    assert body["source"]["persona"] == "lead"
    assert body["target"] == {**body["target"], "persona": "writer",
                              "task": "CHILDJOB write report.md"}  # fmt: skip
    assert body["artifacts"]["insights"] == ["revenue 12900"]
    results = body["results"]
    assert results["status"] == "success"
    assert "CHILD-ANSWER" in results["output"]
    # Gap 2: the child's written file comes back as a result artifact.
    assert results["artifacts"] == ["report.md"]
    # The worker got the child's outcome as the tool result (the event keeps its start).
    shown = calls[0]["data"]["result"]
    assert shown.startswith('{"success": true') and '"status": "success"' in shown
    # One usage tree: the child's run (its own process) links to the parent's run and trace.
    parent = events[0]["run_id"]
    assert body["lineage"]["parentRun"] == parent
    shown_tree = personae_cli("runs", "show", parent, "--tree", "--json", cwd=project)
    tree = json.loads(shown_tree.stdout)
    (child,) = tree["children"]
    assert child["persona"] == "writer" and child["parent_run"] == parent
    assert child["trace_id"] == tree["trace_id"] and child["own"]["calls"] >= 3
    assert tree["total"]["calls"] == tree["own"]["calls"] + child["own"]["calls"]


@pytest.mark.process
def test_handover_without_waiting_returns_the_command(project: Path) -> None:
    spec = f"scripted:{project.parent / 'later.yaml'}"
    events = run(project, "PARENTJOB get the report written", "--persona", "lead",
                 "--model", spec)  # fmt: skip
    call = handover_events(events)[0]["data"]
    assert call["ok"] and '"status": "prepared"' in call["result"]
    (path,) = (project / ".personae" / "handovers").glob("*.json")
    assert f'"contextPath": "{path}"' in call["result"]
    # The same call made directly returns the whole command (the event keeps 500 chars).
    result = handover_to_persona(
        "writer", "CHILDJOB write report.md", source_persona="lead", cwd=project,
        wait_for_results=False, child=ChildOptions(model=spec),
    )  # fmt: skip
    argv = result.command
    assert result.status == "prepared" and result.success
    assert argv[1:4] == ["-m", "personae", "run"]
    assert argv[argv.index("--persona") + 1] == "writer"
    assert "--context-from" in argv and "--non-interactive" in argv
    assert argv[argv.index("--model") + 1] == spec  # the child's default model is the run's
    assert not (project / "report.md").exists()  # nothing ran
    # Running the returned command later does the work and writes the results back.
    done = subprocess.run(argv, check=False, cwd=project, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (project / "report.md").is_file()
    body = json.loads(Path(result.context_path).read_text())
    assert body["results"]["status"] == "success"
    assert body["results"]["artifacts"] == ["report.md"]


def test_persona_without_the_tool_is_refused(project: Path) -> None:
    """Narrow-only: a persona that does not list the tool cannot hand over."""
    spec = f"scripted:{project.parent / 'wait.yaml'}"
    events = run(project, "PARENTJOB get the report written", "--persona", "plain",
                 "--model", spec, "--max-retries", "0", code=5)  # fmt: skip
    calls = handover_events(events)
    assert calls and not any(c["data"]["ok"] for c in calls)
    assert not (project / ".personae" / "handovers").exists()
    assert not (project / "report.md").exists()


def test_depth_cap_refuses_the_tool(project: Path) -> None:
    """At the handover depth cap the tool is not registered, so it is refused."""
    spec = f"scripted:{project.parent / 'wait.yaml'}"
    events = run(project, "PARENTJOB get the report written", "--persona", "lead",
                 "--model", spec, "--max-retries", "0",
                 env={"PERSONAE_HANDOVER_DEPTH": "2"}, code=5)  # fmt: skip
    calls = handover_events(events)
    assert calls and not any(c["data"]["ok"] for c in calls)
    assert "not available" in calls[0]["data"]["result"]
    assert not (project / "report.md").exists()
