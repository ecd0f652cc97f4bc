"""`personae hook post-tool-use`: the host's tool calls recorded as observations, run the way
each host runs it (the rendered ``sh -c`` command, JSON on stdin), never blocking the host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _helpers import run_personae
from personae.hosts.adapters import Host
from personae.hosts.observe_hook import MAX_FIELD_CHARS
from personae.hosts.render import CLAUDE_SETTINGS, CODEX_HOOKS, COPILOT_HOOKS, plan, write
from personae.hosts.snippets import claude_hooks, copilot_hooks
from personae.store.db import Store

PERSONAE = str(Path(sys.executable).parent / "personae")
SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    done = run_personae("init", cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    write(root, plan(root, personae=PERSONAE))
    return root


def _observe_command(root: Path, host: Host) -> str:
    """The post-tool-use command the host file under ``root`` runs (as rendered)."""
    if host is Host.COPILOT:
        config = json.loads((root / COPILOT_HOOKS).read_text(encoding="utf-8"))
        entries = config["hooks"]["postToolUse"]
        return str(next(e["bash"] for e in entries if "hook post-tool-use" in e["bash"]))
    rel = CLAUDE_SETTINGS if host is Host.CLAUDE else CODEX_HOOKS
    config = json.loads((root / rel).read_text(encoding="utf-8"))
    groups = config["hooks"]["PostToolUse"]
    assert all("matcher" not in g for g in groups)  # every tool is recorded
    return str(groups[-1]["hooks"][0]["command"])


def _run(command: str, payload: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        command,
        shell=True,
        input=raw,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def _journal(root: Path) -> list[dict[str, Any]]:
    store = Store(root / ".personae" / "state.db")
    rows = store.fetchall("SELECT kind, tool_name, args, result FROM mind_journal ORDER BY id")
    return [dict(r) for r in rows]


@pytest.mark.process
def test_claude_code_tool_call_is_recorded_redacted_and_bounded(tmp_path: Path) -> None:
    root = _project(tmp_path)
    command = _observe_command(root, Host.CLAUDE)
    payload = {
        "session_id": "s-1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(root / "src"),  # a subfolder: the project is found above it
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"curl -H 'Authorization: Bearer {SECRET}' https://x"},
        "tool_response": {"stdout": "line\n" * 50_000, "stderr": "", "interrupted": False},
        "tool_use_id": "toolu_1",
    }
    (root / "src").mkdir()
    done = _run(command, payload, root / "src")
    assert done.returncode == 0, done.stderr
    [entry] = _journal(root)
    assert entry["kind"] == "tool_result" and entry["tool_name"] == "Bash"
    assert SECRET not in entry["args"] and "curl" in entry["args"]
    assert len(entry["result"]) <= MAX_FIELD_CHARS
    assert "personae: cut to 8000 of" in entry["result"]
    # The credential is flagged back to the model, never repeated.
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "credential" in context and SECRET not in done.stdout


@pytest.mark.process
def test_a_failed_result_comes_back_to_claude_and_codex_as_context(tmp_path: Path) -> None:
    root = _project(tmp_path)
    for host in (Host.CLAUDE, Host.CODEX):
        payload: dict[str, Any] = {
            "session_id": "s-2",
            "cwd": str(root),
            "tool_name": "Bash",
            "tool_input": {"command": "pytest -q"},
            "tool_response": "Traceback (most recent call last): ImportError",
        }
        if host is Host.CODEX:
            payload["turn_id"] = "t-1"
        done = _run(_observe_command(root, host), payload, root)
        assert done.returncode == 0, done.stderr
        context = json.loads(done.stdout)["hookSpecificOutput"]
        assert context["hookEventName"] == "PostToolUse"
        assert "error or failure" in context["additionalContext"]
    assert [e["tool_name"] for e in _journal(root)] == ["Bash", "Bash"]


@pytest.mark.process
def test_copilot_tool_call_is_recorded(tmp_path: Path) -> None:
    root = _project(tmp_path)
    payload = {
        "timestamp": 1764000000000,
        "cwd": str(root),
        "toolName": "bash",
        "toolArgs": json.dumps({"command": "ls", "description": "list"}),
        "toolResult": {"resultType": "failure", "textResultForLlm": "ls: cannot access"},
    }
    done = _run(_observe_command(root, Host.COPILOT), payload, root)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    [entry] = _journal(root)
    assert json.loads(entry["args"]) == {"command": "ls", "description": "list"}
    assert entry["result"] == "failure: ls: cannot access"


@pytest.mark.parametrize(
    "payload",
    [
        "not json at all",
        "[1, 2]",
        {"cwd": "/nonexistent", "tool_name": "Bash", "tool_input": {}, "tool_response": "x"},
        {"cwd": "PROJECT", "tool_name": "mcp__personae__observe", "tool_input": {}},
        {"cwd": "PROJECT", "tool_name": "", "tool_input": {}},
    ],
)
@pytest.mark.process
def test_never_blocks_and_records_nothing_it_should_not(tmp_path: Path, payload: Any) -> None:
    root = _project(tmp_path)
    if isinstance(payload, dict) and payload["cwd"] == "PROJECT":
        payload["cwd"] = str(root)
    done = _run(_observe_command(root, Host.CLAUDE), payload, root)
    assert done.returncode == 0 and done.stdout == ""
    assert _journal(root) == []
    assert not Path("/nonexistent/.personae").exists()


@pytest.mark.process
def test_outside_a_project_nothing_is_created(tmp_path: Path) -> None:
    payload = {"cwd": str(tmp_path), "tool_name": "Bash", "tool_input": {}, "tool_response": "x"}
    proc = subprocess.run(
        [sys.executable, "-m", "personae", "hook", "post-tool-use"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no .personae/, no store


def test_a_missing_binary_does_not_block_the_host(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    missing = str(tmp_path / "uninstalled" / "personae")
    changes = {c.path: c.text for c in plan(root, personae=missing)}
    settings = json.loads(changes[CLAUDE_SETTINGS])
    command = settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    done = _run(command, {"cwd": str(root), "tool_name": "Bash"}, root)
    assert done.returncode == 0  # the tool already ran; a broken recorder must not fail it


@pytest.mark.process
def test_rendering_keeps_the_gate_as_it_was(tmp_path: Path) -> None:
    root = _project(tmp_path)
    settings = json.loads((root / CLAUDE_SETTINGS).read_text(encoding="utf-8"))
    gate = claude_hooks(PERSONAE)
    assert settings["hooks"]["PreToolUse"] == gate["PreToolUse"]
    assert settings["hooks"]["SessionStart"] == gate["SessionStart"]
    copilot = json.loads((root / COPILOT_HOOKS).read_text(encoding="utf-8"))
    assert copilot["hooks"]["preToolUse"] == copilot_hooks(PERSONAE)["hooks"]["preToolUse"]
    again = plan(root, personae=PERSONAE)  # idempotent: our entries are replaced, not added
    assert not any(c.changed for c in again)
