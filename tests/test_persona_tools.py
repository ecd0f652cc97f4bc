"""A loaded persona's tools, end to end with the real tool registry: narrow-only at dispatch."""

from __future__ import annotations

from pathlib import Path

import pytest

from _helpers import run_async, write
from personae.persona import Cast
from personae.tools.grants import effective_tool_names
from personae.tools.registry import ToolRegistry
from personae.tools.subset import ToolRefusedError
from personae.tools.workspace import Workspace


def test_claude_persona_gets_only_its_available_tools(tmp_path: Path) -> None:
    write(
        tmp_path / ".claude/agents/r.md",
        "---\nname: r\ndescription: d\ntools: Read, Grep, WebSearch, mcp__gh__issue, "
        "Bash(git:*), Edit\ndisallowedTools: Edit\n---\nRead things.\n",
    )
    write(tmp_path / "notes.txt", "hello\n")
    cast = Cast.load(tmp_path)
    persona = cast.get("r")
    registry = ToolRegistry.builtin(Workspace(tmp_path))
    names = effective_tool_names(persona, registry.names())
    assert names == ["grep", "read_file"]
    subset = registry.subset(names)

    async def run() -> None:
        text = await subset.dispatch("Read", {"path": "notes.txt"})
        assert "hello" in text
        for refused in ("run_shell", "edit_file", "write_file", "WebSearch"):
            with pytest.raises(ToolRefusedError):
                await subset.dispatch(refused, {"path": "notes.txt", "command": "ls"})

    run_async(run())
    assert [c.refused for c in subset.calls] == [False, True, True, True, True]


def test_sub_agent_persona_narrows_parent(tmp_path: Path) -> None:
    write(
        tmp_path / ".personae/personas/parent.md",
        "---\nname: parent\ndescription: d\ntools: [read_file, grep, list_dir]\n---\n",
    )
    write(
        tmp_path / ".personae/personas/child.md",
        "---\nname: child\ndescription: d\ntools: [read_file, run_shell]\n---\n",
    )
    cast = Cast.load(tmp_path)
    registry = ToolRegistry.builtin(Workspace(tmp_path))
    parent = registry.subset(effective_tool_names(cast.get("parent"), registry.names()))
    child = parent.narrow(cast.get("child").tools)
    assert child.names == ("read_file",)  # run_shell is not the parent's to give
