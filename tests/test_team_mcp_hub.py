"""McpHub against the real mind server over streamable HTTP on loopback: renamed tools,
the grant enforced in ``call_tool`` itself (not only in the listing), and shutdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext, ToolFailed
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import CombinedToolset, FunctionToolset
from pydantic_ai.usage import RunUsage

from _helpers import free_port as _free_port
from _helpers import mind_http_server, run_async
from personae.persona.model import Persona
from personae.team.mcp_servers import McpHub, McpServerToolset, inherited_toolset

MEMORY = "---\nname: Brandon\ndescription: sponsor of the portal\ntype: user\n---\nLikes tea.\n"


@pytest.fixture
def http_server(tmp_path: Path) -> Any:
    (tmp_path / "mem").mkdir()
    (tmp_path / "mem" / "user_brandon.md").write_text(MEMORY)
    args = ["--memory-dir", str(tmp_path / "mem"), "--store", str(tmp_path / "s.db")]
    with mind_http_server(*args, cwd=tmp_path) as url:
        yield url, tmp_path / "mem"


@pytest.mark.process
def test_http_server_tools_are_renamed_granted_and_enforced_at_dispatch(
    http_server: tuple[str, Path],
) -> None:
    url, mem = http_server
    persona = Persona(
        name="reader",
        description="d",
        tools=["mcp__mind__list_memory_files", "mcp__mind__read_memory_file", "mcp__mind__nope"],
        disallowed_tools=["mcp__mind__read_memory_file"],
        mcp_servers={"mind": {"type": "http", "url": url}},
    )
    warnings: list[str] = []

    async def main() -> tuple[list[str], Any, list[str]]:
        hub = McpHub(on_warning=lambda message, data: warnings.append(message))
        try:
            toolset, names = await hub.toolset_for(persona)
            assert toolset is not None
            assert names == {"mcp__mind__list_memory_files"}
            ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
            tools = await toolset.get_tools(ctx)
            assert set(tools) == set(names)
            listed = tools["mcp__mind__list_memory_files"]
            result = await toolset.call_tool("mcp__mind__list_memory_files", {}, ctx, listed)
            # Even with a valid tool object in hand, another name is refused in call_tool.
            with pytest.raises(ToolFailed, match="not granted"):
                await toolset.call_tool(
                    "mcp__mind__write_memory_file",
                    {"name": "x.md", "content": "x"},
                    ctx,
                    listed,
                )
            # Sub-agents inherit from the parent's grant only (and start nothing).
            anything = Persona(name="c1", description="d", tools=None)
            child = await hub.toolset_for(anything, parent_allowed=names, parent=toolset)
            assert child[1] == names
            wider = Persona(name="c2", description="d", tools=["mcp__mind__read_memory_file"])
            assert await hub.toolset_for(wider, parent_allowed=names, parent=toolset) == (
                None,
                frozenset(),
            )
            running = hub.running
        finally:
            await hub.aclose()
        return running, result, hub.running

    running, result, after = run_async(main())
    assert len(warnings) == 1  # the typo, once
    assert "'mcp__mind__nope'" in warnings[0] and "recall" in warnings[0]
    assert "user_brandon.md" in json.dumps(result)
    assert [p.name for p in mem.iterdir()] == ["user_brandon.md"]
    assert len(running) == 1 and after == []


def test_unreachable_http_server_is_one_warning() -> None:
    port = _free_port()  # nothing listens there
    persona = Persona(
        name="p",
        description="d",
        mcp_servers={"web": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}},
    )
    warnings: list[tuple[str, dict[str, Any]]] = []

    async def main() -> tuple[Any, frozenset[str]]:
        hub = McpHub(on_warning=lambda m, d: warnings.append((m, d)), start_timeout=10)
        try:
            first = await hub.toolset_for(persona)
            again = await hub.toolset_for(persona)  # not retried, not warned twice
            assert again == (None, frozenset())
            return first
        finally:
            await hub.aclose()

    assert run_async(main()) == (None, frozenset())
    assert len(warnings) == 1
    message, data = warnings[0]
    assert "'web'" in message and "failed to start" in message and data["server"] == "web"


def test_sub_agent_narrows_the_parent_mcp_toolset_it_is_given() -> None:
    # The parent's MCP toolset is passed explicitly: two servers, the child's persona
    # grants one tool of each; nothing outside the parent's names; no parent, nothing.
    def ping() -> str:
        return "pong"

    def pong() -> str:
        return "ping"

    servers = [
        McpServerToolset(FunctionToolset([ping, pong]), server=name, granted=frozenset(granted))
        for name, granted in [
            ("a", {"mcp__a__ping", "mcp__a__pong"}),
            ("b", {"mcp__b__ping"}),
        ]
    ]
    parent = CombinedToolset(servers)
    parent_allowed = frozenset({"mcp__a__ping", "mcp__a__pong", "mcp__b__ping"})
    child = Persona(
        name="c", description="d", tools=["mcp__a__pong", "mcp__b__ping", "mcp__b__pong"]
    )

    toolset, names = inherited_toolset(child, parent, parent_allowed)
    assert names == {"mcp__a__pong", "mcp__b__ping"}
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    assert toolset is not None
    assert set(run_async(toolset.get_tools(ctx))) == names
    assert inherited_toolset(child, servers[0], parent_allowed)[1] == {"mcp__a__pong"}
    assert inherited_toolset(child, parent, frozenset({"mcp__a__ping"})) == (None, frozenset())
    assert inherited_toolset(child, None, parent_allowed) == (None, frozenset())
