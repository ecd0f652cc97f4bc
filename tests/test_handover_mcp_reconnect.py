"""MCP server configurations across a handover: the source's entries are carried without
secrets (references to the receiver's environment instead), the receiving persona and
project decide which the child starts, and end to end a real MCP server (our mind server,
stdio) is started again by a `personae run --context-from` process from the entry a
`personae handover create` process wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _helpers import VALIDATOR_OK, build_project, child_env, run_personae
from personae.handover.files import read_handover
from personae.handover.mcp_carry import carried_configs, reconnect_plan
from personae.handover.schema import ContextHandover
from personae.persona.model import Persona

SRC = Path(__file__).resolve().parents[1] / "src"
TOKEN = "tok-9f2c4e1a7b3d5f60"  # no credential shape: only its variable's name says secret
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def persona(name: str, tools: list[str] | None = None, **extra: Any) -> Persona:
    return Persona(name=name, description="x", tools=tools, **extra)


def test_entries_are_carried_with_secrets_replaced_by_references() -> None:
    servers = {
        "mind": {
            "command": "python",
            "args": ["-m", "mindserver", f"--token={GHP}"],
            "env": {"MIND_TOKEN": TOKEN, "PYTHONPATH": "/opt/src", "REF": "${HOME}"},
            "timeout": 30,  # not an entry field: stays behind
        },
        "github": {
            "type": "http",
            "url": "https://bot:hunter2pass@api.example.org/mcp",
            "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}", "X-Api-Key": "k-12345678"},
        },
        "unconfigured": None,
    }
    carried, notes = carried_configs(servers, environ={})
    assert set(carried) == {"mind", "github"}
    mind = carried["mind"]
    assert mind == {
        "command": "python",
        "args": ["-m", "mindserver", "${MCP_MIND_ARG_2}"],
        "env": {"MIND_TOKEN": "${MIND_TOKEN}", "PYTHONPATH": "/opt/src", "REF": "${HOME}"},
    }
    github = carried["github"]
    assert github["url"] == "${MCP_GITHUB_URL}"
    # A reference is carried as it is; a literal under a secret name becomes one.
    assert github["headers"] == {
        "Authorization": "Bearer ${GITHUB_TOKEN}",
        "X-Api-Key": "${MCP_GITHUB_X_API_KEY}",
    }
    assert TOKEN not in json.dumps(carried) and GHP not in json.dumps(carried)
    assert "hunter2pass" not in json.dumps(carried)
    assert notes == [
        "github.url -> ${MCP_GITHUB_URL}",
        "github.headers.X-Api-Key -> ${MCP_GITHUB_X_API_KEY}",
        "mind.args[2] -> ${MCP_MIND_ARG_2}",
        "mind.env.MIND_TOKEN -> ${MIND_TOKEN}",
    ]
    # A value equal to a secret-named variable of the writer's environment is hidden too.
    again, _ = carried_configs(
        {"s": {"command": "x", "env": {"PLAIN": TOKEN}}}, environ={"DEPLOY_TOKEN": TOKEN}
    )
    assert again["s"]["env"] == {"PLAIN": "${PLAIN}"}


CONFIGS: dict[str, Any] = {
    "mind": {"command": "python", "args": ["-m", "mind"]},
    "shared": {"command": "python", "args": ["-m", "from-the-source"]},
    "notes": {"command": "python", "args": ["-m", "notes"]},
}
PROJECT: dict[str, Any] = {"shared": {"command": "python", "args": ["-m", "from-the-project"]}}


def plan_for(who: Persona | None, mode: str, names: tuple[str, ...] = ()) -> Any:
    return reconnect_plan(
        who, names=[*CONFIGS, *names], configs=CONFIGS, project_servers=PROJECT, mode=mode,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_receiving_persona_and_project_decide_what_is_started() -> None:
    picky = persona("analyst", ["read_file", "mcp__mind__recall", "mcp__shared"])
    default = plan_for(picky, "project")
    # Only servers the project configures, with the project's entry; never a command
    # from the file unless the project says so.
    assert default.servers == {"shared": PROJECT["shared"]}
    assert "the source's differs" in default.started["shared"]
    assert "configured only in the handover file" in default.refused["mind"]
    assert "does not allow it" in default.refused["notes"]
    trusting = plan_for(picky, "handover")
    assert trusting.servers == {"mind": CONFIGS["mind"], "shared": PROJECT["shared"]}
    assert set(trusting.refused) == {"notes"}
    assert any("'notes' of the source not started" in n for n in trusting.notes())
    # A whole-server deny wins; a persona without a tools list allows every server.
    denying = persona("d", None, disallowed_tools=["mcp__mind"])
    assert "denies it" in plan_for(denying, "handover").refused["mind"]
    everything = plan_for(persona("e"), "handover")
    assert set(everything.servers) == {"mind", "shared", "notes"}
    # The persona's own entry is used as it is (nothing added).
    own = persona("o", ["mcp__mind"], mcp_servers={"mind": {"command": "own"}})
    assert plan_for(own, "handover").started["mind"] == "the persona's own"
    assert "mind" not in plan_for(own, "handover").servers
    # none: nothing; no persona: nothing; a name with no entry anywhere: reported.
    assert plan_for(persona("e"), "none").servers == {}
    assert set(plan_for(None, "handover").refused) == {"mind", "shared", "notes"}
    lone = plan_for(persona("e"), "handover", names=("ghost",))
    assert lone.refused["ghost"] == "no configuration for it here, and none in the handover"


def test_a_version_1_1_file_without_entries_still_loads(tmp_path: Path) -> None:
    old = {
        "version": "1.1.0",
        "timestamp": "2026-01-01T00:00:00Z",
        "handoverId": "h-1",
        "source": {"persona": "a", "workingDirectory": str(tmp_path)},
        "target": {"persona": "b", "task": "t"},
        "context": {"mcpServers": ["mind"]},
    }
    path = tmp_path / "h.json"
    path.write_text(json.dumps(old))
    loaded = read_handover(path).handover
    assert loaded.version == "1.1.0" and loaded.context.mcp_servers == ["mind"]
    assert loaded.context.mcp_server_configs is None
    dumped = loaded.model_dump(mode="json", by_alias=True)
    assert "mcpServerConfigs" not in dumped["context"]
    assert ContextHandover.model_validate(dumped) == loaded


def mind_entry(root: Path) -> dict[str, Any]:
    """Our own mind server over stdio on ``root/mem``, with a secret-named variable."""
    files = ["--memory-dir", str(root / "mem"), "--store", str(root / "mind.db")]
    return {
        "command": sys.executable,
        "args": ["-m", "personae", "serve", *files, "--prompt", str(root / "mind.md")],
        "env": {"PYTHONPATH": str(SRC), "MIND_TOKEN": TOKEN},
    }


SOURCE = """---
name: librarian
description: Keeps the team's memory.
tools: [read_file, mcp__mind__recall, mcp__echo__ping]
mcpServers:
  mind: {mind}
  echo: {echo}
---
You keep the memory.
"""

# No tools list: every tool of every server it runs with; the project's echo server denied.
TARGET = """---
name: analyst
description: Analyses with what the memory holds.
disallowedTools: [mcp__echo]
---
You analyse.
"""

MEMORY = "---\nname: Brandon\ndescription: sponsor of the portal\ntype: user\n---\nLikes tea.\n"


# What the receiver's scripted answers need: the source's servers named in its context,
# the mind server's tool offered (only when the child started it again) and its answer.
RECEIVER = [
    {"when": {"role": "manager", "contains": "MCP servers active at the source: echo, mind"},
     "output": {"subtasks": [{"description": "Recall what Brandon likes"}]}},
    # Offered only when the child started the mind server again from the handover.
    {"when": {"role": "worker", "tool": "mcp__mind__recall"},
     "tool_calls": [{"name": "mcp__mind__recall", "args": {"query": "tea"}}]},
    # The real server's answer (read from the memory folder) reached the model.
    {"when": {"role": "worker", "contains": "Likes tea"},
     "text": "Brandon likes tea (user_brandon.md, recalled through the mind server)."},
    {"when": {"role": "validator"}, "output": VALIDATOR_OK},
    {"when": {"role": "manager"}, "text": "Brandon likes tea."},
]  # fmt: skip


def memory_project(root: Path) -> Path:
    """The librarian (mind and echo servers of its own), the analyst (none; echo denied),
    the project's echo server and a config that trusts handover files' entries."""
    echo = {"command": sys.executable, "args": [str(Path(__file__).parent / "_mcp_echo_server.py")]}
    build_project(
        root,
        {
            "librarian": SOURCE.format(mind=json.dumps(mind_entry(root)), echo=json.dumps(echo)),
            "analyst": TARGET,
        },
        {
            "mem/user_brandon.md": MEMORY,
            ".personae/config.yaml": "handover:\n  mcp_reconnect: handover\n",
            ".mcp.json": json.dumps({"mcpServers": {"echo": echo}}),
            "scenario.yaml": yaml.safe_dump({"steps": RECEIVER}),
        },
    )
    return root


@pytest.mark.process
def test_the_child_process_reconnects_to_the_source_server(tmp_path: Path) -> None:
    root = memory_project(tmp_path / "proj")
    steps = RECEIVER
    created = run_personae(
        "handover", "create", "--from", "librarian", "--to", "analyst",
        "--task", "What does Brandon like?", cwd=root, timeout=120,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    # The writer is told which variables the receiver needs.
    assert "mind.env.MIND_TOKEN -> ${MIND_TOKEN}" in created.stderr, created.stderr
    path = Path(created.stdout.strip())
    text = path.read_text()
    assert TOKEN not in text  # the secret stayed behind: only its name travels
    saved = json.loads(text)
    assert saved["version"] == "1.2.0"
    assert saved["context"]["mcpServers"] == ["echo", "mind"]
    carried = saved["context"]["mcpServerConfigs"]
    assert carried["mind"]["env"] == {"PYTHONPATH": str(SRC), "MIND_TOKEN": "${MIND_TOKEN}"}
    assert carried["mind"]["args"] == mind_entry(root)["args"]
    # The receiver: a second process, the server's token from its own environment.
    ran = run_personae(
        "run", "--context-from", str(path), "--non-interactive",
        "--model", "scripted:scenario.yaml", cwd=root, timeout=300,
        env=child_env({"MIND_TOKEN": TOKEN}),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (
        "MCP server 'mind' of the source reconnected (configuration: from the handover file"
        in ran.stderr
    )
    assert "MCP server 'echo' of the source not started: persona analyst denies it" in (ran.stderr)
    results = json.loads(path.read_text())["results"]
    assert results["status"] == "success" and "tea" in results["output"]
    # Without the variable the receiver cannot start it: the reference is not a value.
    plain = [steps[0], {"when": {"role": "worker"}, "text": "No memory server here."},
             *steps[3:]]  # fmt: skip
    (root / "plain.yaml").write_text(yaml.safe_dump({"steps": plain}))
    bare = run_personae(
        "run", "--context-from", str(path), "--non-interactive", "--context-return",
        str(tmp_path / "r.json"), "--model", "scripted:plain.yaml", cwd=root, timeout=300,
        env=child_env(drop=["MIND_TOKEN"]),
    )  # fmt: skip
    assert bare.returncode == 0, bare.stdout + bare.stderr
    said = bare.stdout + bare.stderr  # the run's warning event
    assert "MCP server 'mind'" in said and "'MIND_TOKEN' is not set" in said, said


KEEPER = [
    {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Find Brandon"}]}},
    {"when": {"role": "worker", "tool": "mcp__mind__recall"},
     "tool_calls": [{"name": "mcp__mind__recall", "args": {"query": "Brandon"}}]},
    {"when": {"role": "worker", "contains": "user_brandon.md"},
     "text": "Brandon is the portal's sponsor (user_brandon.md)."},
    {"when": {"role": "validator"}, "output": VALIDATOR_OK},
    {"when": {"role": "manager"}, "text": "Brandon sponsors the portal; ask the analyst."},
]  # fmt: skip


@pytest.mark.process
def test_a_chain_step_reconnects_to_the_previous_step_persona_server(tmp_path: Path) -> None:
    root = memory_project(tmp_path / "proj")
    (root / "keep.yaml").write_text(yaml.safe_dump({"steps": KEEPER}))
    workflow = {
        "name": "memory",
        "steps": [
            {"id": "keep", "persona": "librarian", "task": "Who is Brandon?",
             "model": "scripted:keep.yaml"},
            {"id": "use", "persona": "analyst", "task": "What does Brandon like?",
             "model": "scripted:scenario.yaml"},
        ],
    }  # fmt: skip
    (root / "workflow.yaml").write_text(yaml.safe_dump(workflow))
    out = run_personae(
        "chain", "run", "workflow.yaml", cwd=root, timeout=400,
        env=child_env({"MIND_TOKEN": TOKEN}),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "| use | analyst | success | 1 |" in out.stdout, out.stdout
    saved = root / ".personae" / "chains" / "memory" / "handovers" / "use.json"
    text = saved.read_text()
    assert TOKEN not in text
    handover = json.loads(text)
    assert handover["source"]["persona"] == "librarian"
    assert handover["context"]["mcpServers"] == ["echo", "mind"]
    assert handover["context"]["mcpServerConfigs"]["mind"]["env"]["MIND_TOKEN"] == "${MIND_TOKEN}"
    assert handover["results"]["status"] == "success"
    assert handover["results"]["output"].strip() == "Brandon likes tea."
