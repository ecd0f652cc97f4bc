"""Persona MCP entries: which servers start, which tools are granted, config checks, and
that `personas check` accepts `mcp__server__tool` names of configured servers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from personae.errors import ConfigError
from personae.persona.cast import Cast
from personae.persona.mcp_config import parse_server, servers_for, tool_granted
from personae.persona.model import Persona
from personae.tools.grants import effective_tool_names

MIND = {"command": "python", "args": ["-m", "personae", "serve"]}


def persona(**kw: object) -> Persona:
    return Persona(name="p", description="d", **kw)  # type: ignore[arg-type]


def test_tools_absent_grants_every_tool_of_its_own_servers() -> None:
    p = persona(tools=None, mcp_servers={"mind": MIND})
    assert tool_granted(p, "mind", "recall") and tool_granted(p, "mind", "anything")
    assert servers_for(p, {"other": MIND}) == {"mind": MIND}  # project servers not started


def test_single_tool_server_and_wildcard_grants() -> None:
    one = persona(tools=["read_file", "mcp__mind__recall"])
    assert tool_granted(one, "mind", "recall")
    assert not tool_granted(one, "mind", "write_memory_file")
    assert not tool_granted(one, "other", "recall")
    for entry in ("mcp__mind", "mcp__mind__*"):
        whole = persona(tools=[entry])
        assert tool_granted(whole, "mind", "write_memory_file"), entry
        assert not tool_granted(whole, "mindful", "recall"), entry


def test_disallowed_and_patterns_fail_closed() -> None:
    p = persona(
        tools=None,
        disallowed_tools=["mcp__mind__write_memory_file"],
        mcp_servers={"mind": MIND, "web": MIND},
    )
    assert tool_granted(p, "mind", "recall")
    assert not tool_granted(p, "mind", "write_memory_file")
    # A pattern-restricted allow entry cannot be enforced: it grants nothing.
    patterned = persona(tools=["mcp__mind__recall(query:tea)"])
    assert not tool_granted(patterned, "mind", "recall")
    assert servers_for(patterned, {"mind": MIND}) == {}
    # Denying a whole server does not even start it.
    denied = persona(tools=None, disallowed_tools=["mcp__web__*"], mcp_servers=p.mcp_servers)
    assert list(servers_for(denied, {})) == ["mind"]


def test_servers_named_in_tools_come_from_the_project_or_the_persona() -> None:
    p = persona(tools=["mcp__mind__recall", "mcp__own__x"], mcp_servers={"own": MIND})
    assert servers_for(p, {"mind": {"command": "m"}}) == {"mind": {"command": "m"}, "own": MIND}
    # A name-only reference (mcpServers: [mind]) resolves to the project entry.
    ref = persona(tools=None, mcp_servers={"mind": {}})
    assert servers_for(ref, {"mind": MIND}) == {"mind": MIND}
    assert servers_for(ref, {}) == {"mind": None}  # unconfigured: a warning at run time


@given(
    st.lists(st.sampled_from(["recall", "list_memory_files", "write_memory_file", "x"])),
    st.lists(st.sampled_from(["recall", "write_memory_file", "*"]), max_size=3),
)
def test_grant_never_exceeds_the_tools_list_minus_disallowed(
    allowed: list[str], denied: list[str]
) -> None:
    p = persona(
        tools=[f"mcp__mind__{t}" for t in allowed],
        disallowed_tools=[f"mcp__mind__{t}" for t in denied],
    )
    for tool in ["recall", "list_memory_files", "write_memory_file", "x", "y"]:
        if tool_granted(p, "mind", tool):
            assert tool in allowed
            assert tool not in denied and "*" not in denied


def test_parse_stdio_and_http_entries_expand_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEST_DIR", "/srv/mem")
    monkeypatch.delenv("MCP_TEST_UNSET", raising=False)
    spec = parse_server(
        "mind",
        {
            "command": "python",
            "args": ["--memory-dir", "${MCP_TEST_DIR}", 3],
            "env": {"LEVEL": "${MCP_TEST_UNSET:-info}", "DEBUG": True},
        },
    )
    assert spec.transport == "stdio" and spec.args == ("--memory-dir", "/srv/mem", "3")
    assert spec.env == {"LEVEL": "info", "DEBUG": "true"}
    headers = {"X": "${MCP_TEST_DIR}"}
    web = parse_server("web", {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": headers})
    assert web.transport == "http" and web.headers == {"X": "/srv/mem"}
    assert parse_server("s", {"type": "sse", "url": "https://h/sse"}).transport == "sse"


@pytest.mark.parametrize(
    ("name", "config", "needle"),
    [
        ("mind", {}, "no configuration"),
        ("mind", {"command": ""}, "command"),
        ("mind", {"command": "x", "args": "a b"}, "args"),
        ("mind", {"command": "x", "env": {"A": ["b"]}}, "env"),
        ("mind", {"command": "x", "args": ["${MCP_TEST_UNSET}"]}, "MCP_TEST_UNSET"),
        ("mind", {"type": "ws", "url": "ws://h"}, "unknown type"),
        ("mind", {"type": "http", "url": "file:///etc/passwd"}, "http://"),
        ("bad name!", MIND, "bad server name"),
    ],
)
def test_bad_entries_name_the_field(
    name: str, config: dict[str, object], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError) as info:
        parse_server(name, config)
    assert needle in str(info.value)


def test_check_does_not_warn_about_tools_of_configured_servers(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"mind": {"command": "x"}}}')
    (agents / "a.md").write_text(
        "---\nname: a\ndescription: d\ntools: Read, mcp__mind__recall, mcp__gone__x\n---\nbody\n"
    )
    (agents / "b.md").write_text(
        "---\nname: b\ndescription: d\ntools: mcp__own__t\nmcpServers:\n"
        "  own:\n    command: y\n---\nbody\n"
    )
    cast = Cast.load(tmp_path)
    text = "\n".join(str(p) for p in cast.problems)
    assert "mcp__gone__x" in text and "MCP servers not configured: gone" in text
    assert "mcp__mind__recall" not in text and "mcp__own__t" not in text
    assert cast.get("a").tools == ["read_file", "mcp__mind__recall"]
    assert cast.get("b").tools == ["mcp__own__t"]


_ENTRIES = st.sampled_from(
    ["mcp__gh", "mcp__gh__*", "mcp__gh__delete_repo", "mcp__gh__list", "mcp__ghx", "read_file",
     "mcp__gh__delete_repo(x)"]
)  # fmt: skip


@given(
    st.none() | st.lists(_ENTRIES, max_size=4),
    st.lists(_ENTRIES, max_size=3),
    st.sampled_from(["delete_repo", "list", "other"]),
)
def test_integrations_narrow_mcp_tools_as_the_team_runtime_does(
    tools: list[str] | None, disallowed: list[str], tool: str
) -> None:
    p = persona(tools=tools, disallowed_tools=disallowed)
    name = f"mcp__gh__{tool}"
    assert (name in effective_tool_names(p, [name])) == tool_granted(p, "gh", tool)


def test_a_disallowed_server_is_not_kept_by_the_pydantic_ai_narrowing() -> None:
    p = persona(tools=None, disallowed_tools=["mcp__gh"])
    assert effective_tool_names(p, ["mcp__gh__delete_repo", "read_file"]) == ["read_file"]
    whole = persona(tools=["mcp__gh__*"])
    assert effective_tool_names(whole, ["mcp__gh__delete_repo", "read_file"]) == [
        "mcp__gh__delete_repo"
    ]
