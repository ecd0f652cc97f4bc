"""Persona MCP servers end to end: the real mind server (`personae serve`,
stdio) configured as a persona's mcpServers entry, driven by the scripted replay server through
`run_turn`. Tool results reach the model, non-granted tools are refused at dispatch, the
validator sees the MCP tools, the server process gets a clean environment and is gone
after the turn; a server that cannot start is a warning and the run goes on."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from _helpers import VALIDATOR_OK as OK
from _helpers import events_of as events
from _helpers import one_read_steps, requests_with, run_async, run_scenario, tool_results
from personae.errors import RunError
from personae.models import ModelResolver, Scenario, scripted_function_model
from personae.models.scenario import ROLE_MARKER
from personae.team.events import Event
from personae.team.result import RunResult
from personae.team.session import RunOptions, run_turn

SRC = Path(__file__).resolve().parents[1] / "src"
MEMORY = "---\nname: Brandon\ndescription: sponsor of the portal\ntype: user\n---\nLikes tea.\n"


def mind_entry(root: Path) -> dict[str, Any]:
    """A stdio entry starting our own mind server on ``root/mem``."""
    files = ["--memory-dir", str(root / "mem"), "--store", str(root / "mind.db")]
    return {
        "command": sys.executable,
        "args": ["-m", "personae", "serve", *files, "--prompt", str(root / "mind.md")],
        # Set explicitly: the server gets no PYTHONPATH of ours otherwise.
        "env": {"PYTHONPATH": str(SRC), "MIND_MARKER": "set-by-persona"},
    }


def make_project(root: Path, personas: dict[str, str], servers: dict[str, Any]) -> Path:
    (root / "mem").mkdir(parents=True)
    (root / "mem" / "user_brandon.md").write_text(MEMORY)
    folder = root / ".claude" / "agents"
    folder.mkdir(parents=True)
    for name, text in personas.items():
        (folder / f"{name}.md").write_text(text)
    if servers:
        (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return root


def server_pids(marker: str) -> dict[int, dict[str, str]]:
    """Live processes whose command line contains ``marker``, with their environment."""
    found: dict[int, dict[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if marker not in cmd or "serve" not in cmd:
                continue
            raw = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        env = dict(item.decode().split("=", 1) for item in raw if b"=" in item)
        found[int(entry.name)] = env
    return found


def run(
    root: Path, persona: str, steps: list[dict[str, Any]], seen: dict[int, dict[str, str]]
) -> tuple[RunResult[Any], Any]:
    def listener(event: Event) -> None:
        # While the turn runs, look for the server process (real /proc, real pid).
        if event.kind.value == "tool_call" and str(event.data.get("tool", "")).startswith("mcp__"):
            seen.update(server_pids(str(root / "mem")))

    task = "What does Brandon like?"
    return run_scenario(
        root, steps, task, persona=persona, listeners=[listener], model_name="scripted:t"
    )


RECALLER = """---
name: recaller
description: Recalls memories.
tools: Read, mcp__mind__recall, mcp__mind__list_memory_files
mcpServers:
  mind: {entry}
---
You recall things from memory.
"""


@pytest.mark.process
def test_persona_mcp_tools_reach_the_model_and_are_narrowed_at_dispatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERSONAE_TEST_SECRET", "must-not-leak")
    monkeypatch.setenv("LD_PRELOAD", "")  # empty: harmless here, but must not be passed on
    root = make_project(
        tmp_path, {"recaller": RECALLER.format(entry=json.dumps(mind_entry(tmp_path)))}, {}
    )
    write = {"name": "x.md", "content": "---\nname: X\ndescription: x\ntype: user\n---\nx\n"}
    steps = [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Recall Brandon"}]}},
        {
            "when": {"role": "worker"},
            "tool_calls": [{"name": "mcp__mind__recall", "args": {"query": "tea"}}],
        },
        # Exists on the server but is not granted: refused, never runs.
        {
            "when": {"role": "worker"},
            "tool_calls": [{"name": "mcp__mind__write_memory_file", "args": write}],
        },
        {"when": {"role": "worker"}, "text": "Brandon likes tea (from memory)."},
        # The refused call is a failed tool: the validator rejects without a model call and
        # the worker is asked again (strategy dispatch); it now uses a granted tool.
        {
            "when": {"role": "worker"},
            "tool_calls": [{"name": "mcp__mind__list_memory_files", "args": {}}],
        },
        {"when": {"role": "worker"}, "text": "Brandon likes tea (user_brandon.md)."},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "Brandon likes tea."},
    ]
    seen: dict[int, dict[str, str]] = {}
    outcome, player = run(root, "recaller", steps, seen)

    worker_calls = requests_with(player, ROLE_MARKER.format(role="worker"))
    offered = {t["function"]["name"] for t in worker_calls[0]["tools"]}
    assert {"mcp__mind__recall", "mcp__mind__list_memory_files", "read_file"} <= offered
    assert "mcp__mind__write_memory_file" not in offered
    # The recall result (from the real server reading the memory folder) reached the model.
    recalled = tool_results(worker_calls[1])
    assert any("user_brandon.md" in r and "Brandon" in r for r in recalled), recalled
    # The non-granted call was refused and did nothing on the server.
    assert sorted(p.name for p in (tmp_path / "mem").iterdir()) == ["user_brandon.md"]
    calls = events(outcome, "tool_call")
    assert [(e.data["tool"], e.data["ok"]) for e in calls] == [
        ("mcp__mind__recall", True),
        ("mcp__mind__write_memory_file", False),
        ("mcp__mind__list_memory_files", True),
    ]
    first, second = events(outcome, "work_result")
    assert first.data["tools_used"] == ["mcp__mind__recall"]
    assert [f["tool"] for f in first.data["failed_tools"]] == ["mcp__mind__write_memory_file"]
    assert second.data["tools_used"] == ["mcp__mind__list_memory_files"]
    assert second.data["failed_tools"] == []
    # The validator sees the MCP tools among the tools available.
    validator_calls = requests_with(player, ROLE_MARKER.format(role="validator"))
    assert "mcp__mind__recall" in json.dumps(validator_calls[0]["messages"])
    assert outcome.status == "done"
    # The server ran during the turn with only a safe base environment plus its own entries.
    assert len(seen) == 1, seen
    env = next(iter(seen.values()))
    assert env["MIND_MARKER"] == "set-by-persona" and env["PYTHONPATH"] == str(SRC)
    assert "PERSONAE_TEST_SECRET" not in env and "LD_PRELOAD" not in env
    # ... and is gone once the turn is over.
    assert not any(Path(f"/proc/{pid}").exists() for pid in seen)
    assert server_pids(str(tmp_path / "mem")) == {}


LEAD = """---
name: lead
description: Delegates memory work.
tools: Task, mcp__mind__list_memory_files
---
LEAD: delegate.
"""

CHILD = """---
name: librarian
description: Lists memories.
mcpServers: [mind]
---
CHILD-LIBRARIAN: list the memory files.
"""


@pytest.mark.process
def test_sub_agent_gets_only_mcp_tools_its_parent_has(tmp_path: Path) -> None:
    # The server is configured for the project (.mcp.json); personas refer to it by name.
    personas = {"lead": LEAD, "librarian": CHILD}
    root = make_project(tmp_path, personas, {"mind": mind_entry(tmp_path)})
    delegate = {"name": "agent", "args": {"name": "librarian", "task": "List memories"}}
    steps = [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Delegate it"}]}},
        {"when": {"role": "worker"}, "tool_calls": [delegate]},
        # The child's persona grants everything of 'mind', but its parent has only one tool.
        {
            "when": {"contains": "CHILD-LIBRARIAN"},
            "tool_calls": [{"name": "mcp__mind__recall", "args": {"query": "tea"}}],
        },
        {
            "when": {"contains": "CHILD-LIBRARIAN"},
            "tool_calls": [{"name": "mcp__mind__list_memory_files", "args": {}}],
        },
        {"when": {"contains": "CHILD-LIBRARIAN"}, "text": "one file: user_brandon.md"},
        {"when": {"role": "worker"}, "text": "done"},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "final"},
    ]
    seen: dict[int, dict[str, str]] = {}
    outcome, player = run(root, "lead", steps, seen)
    child_calls = requests_with(player, "CHILD-LIBRARIAN")
    offered = {t["function"]["name"] for t in child_calls[0]["tools"]}
    assert {n for n in offered if n.startswith("mcp__")} == {"mcp__mind__list_memory_files"}
    assert any("user_brandon.md" in r for r in tool_results(child_calls[-1]))
    calls = [(e.data["tool"], e.data["ok"]) for e in events(outcome, "tool_call")]
    assert ("mcp__mind__recall", False) in calls
    assert ("mcp__mind__list_memory_files", True) in calls
    end = next(e for e in events(outcome, "subagent") if e.data["phase"] == "end")
    assert end.data["status"] == "partial"  # one refused call
    assert len(seen) == 1  # parent and child share one server process for the turn
    assert server_pids(str(tmp_path / "mem")) == {}


BROKEN = """---
name: broken
description: Has a server that cannot start.
tools: Read, mcp__ghost__x, mcp__typo__y
mcpServers:
  ghost:
    command: /nonexistent/personae-mcp-server
  typo:
    type: websocket
    url: ws://127.0.0.1:1
---
BROKEN persona.
"""


@pytest.mark.process
def test_server_that_fails_to_start_is_a_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    root = make_project(tmp_path, {"broken": BROKEN}, {})
    (root / "notes.txt").write_text("hello\n")
    steps = one_read_steps(
        "notes.txt", subtask="Read notes", report="notes say hello", answer="hello"
    )
    outcome, player = run(root, "broken", steps, {})
    warnings = [e for e in events(outcome, "warning") if e.data.get("action") == "mcp_server"]
    text = " ".join(e.message for e in warnings)
    assert "'ghost'" in text and "failed to start" in text and "No such file" in text
    assert "'typo'" in text and "unknown type" in text
    assert "Traceback" not in text
    assert len(warnings) == 2  # once per server, not once per attempt
    assert outcome.status == "done"
    assert any("failed to start" in w for w in outcome.warnings)
    offered = {t["function"]["name"] for t in player.requests[1]["tools"]}
    assert "read_file" in offered and not any(n.startswith("mcp__") for n in offered)


@pytest.mark.process
def test_server_is_stopped_when_the_turn_fails(tmp_path: Path) -> None:
    root = make_project(
        tmp_path, {"recaller": RECALLER.format(entry=json.dumps(mind_entry(tmp_path)))}, {}
    )
    steps = [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Recall"}]}},
        {
            "when": {"role": "worker"},
            "tool_calls": [{"name": "mcp__mind__list_memory_files", "args": {}}],
        },
        # The scenario ends here: the next model request fails and the run errors out.
    ]
    model = scripted_function_model(Scenario.model_validate({"steps": steps}))
    seen: dict[int, dict[str, str]] = {}

    def listener(event: Event) -> None:
        if event.kind.value == "tool_call":
            seen.update(server_pids(str(root / "mem")))

    options = RunOptions(root=root, persona="recaller", include_git_log=False)
    with pytest.raises(RunError):
        run_async(
            run_turn(
                "List memories",
                options,
                listeners=[listener],
                resolver=ModelResolver.using(model, "scripted:t"),
            )
        )
    assert len(seen) == 1
    assert not any(Path(f"/proc/{pid}").exists() for pid in seen)


STRICT = """---
name: archivist
description: Answers from memory only.
tools: [mcp__mind__recall, mcp__mind__list_memory_files]
mcp_servers:
  mind: {entry}
constraints:
  required_tools: [mcp__mind__recall]
  validation_guidance: Every claim must come from a mcp__mind__recall result.
---
ARCHIVIST.
"""


@pytest.mark.process
def test_validator_sees_the_mcp_tools_and_enforces_a_required_one(tmp_path: Path) -> None:
    # The validator sees the persona's MCP tools and uses them in validation.
    folder = tmp_path / ".personae" / "personas"
    folder.mkdir(parents=True)
    (folder / "archivist.md").write_text(STRICT.format(entry=json.dumps(mind_entry(tmp_path))))
    root = make_project(tmp_path, {}, {})
    steps = [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "What is kept?"}]}},
        {
            "when": {"role": "worker"},
            "tool_calls": [{"name": "mcp__mind__list_memory_files", "args": {}}],
        },
        {"when": {"role": "worker"}, "text": "One memory about Brandon."},
        # Rejected in code (no model call): the required MCP tool was not used.
        {
            "when": {"contains": "mcp__mind__recall"},
            "tool_calls": [{"name": "mcp__mind__recall", "args": {"query": "Brandon"}}],
        },
        {"when": {"role": "worker"}, "text": "Brandon likes tea."},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "Brandon likes tea."},
    ]
    outcome, player = run(root, "archivist", steps, {})
    first = events(outcome, "validation")[0]
    assert first.data["used_llm"] is False and first.data["approved"] is False
    assert "required tools not used: mcp__mind__recall" in first.message
    correction = events(outcome, "correction")[0]
    assert "mcp__mind__recall" in correction.message
    validator_call = requests_with(player, ROLE_MARKER.format(role="validator"))[0]
    sent = json.dumps(validator_call["messages"])
    assert "mcp__mind__recall" in sent and "Every claim must come from" in sent
    assert outcome.status == "done"


WHOLE_SERVER = """---
name: librarian
description: Answers from memory.
tools: [mcp__mind]
mcp_servers:
  mind: {entry}
---
LIBRARIAN.
"""


@pytest.mark.process
def test_validator_prompt_lists_the_tools_discovered_from_the_server(tmp_path: Path) -> None:
    # The persona declares only the whole server: the tool names are known once the server
    # answers at run time. The validator's prompt lists those, not the declared entry.
    folder = tmp_path / ".personae" / "personas"
    folder.mkdir(parents=True)
    (folder / "librarian.md").write_text(
        WHOLE_SERVER.format(entry=json.dumps(mind_entry(tmp_path)))
    )
    root = make_project(tmp_path, {}, {})
    steps = [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "What is kept?"}]}},
        {
            "when": {"role": "worker"},
            "tool_calls": [{"name": "mcp__mind__list_memory_files", "args": {}}],
        },
        {"when": {"role": "worker"}, "text": "One memory about Brandon (user_brandon.md)."},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "One memory."},
    ]
    outcome, player = run(root, "librarian", steps, {})
    assert outcome.status == "done"
    validator_call = requests_with(player, ROLE_MARKER.format(role="validator"))[0]
    sent = "\n".join(str(m.get("content")) for m in validator_call["messages"])
    listed = sent.split("<worker_tools>", 1)[1].split("</worker_tools>", 1)[0]
    for tool in ("mcp__mind__recall", "mcp__mind__observe", "mcp__mind__list_memory_files"):
        assert tool in listed, listed
    assert "read_file" not in listed  # not granted to this persona
