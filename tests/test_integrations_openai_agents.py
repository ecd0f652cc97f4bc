"""personae[openai-agents] against the real OpenAI Agents SDK and our scripted replay server.

The SDK speaks OpenAI chat completions to a loopback scripted replay server
(``personae.models.ScriptedServer``); what it sends is read back from the server.

The SDK (with openai and mcp) is imported where a test uses it, not at the top: importing it
costs ~5 s, which every pytest-xdist worker would pay while collecting.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from _helpers import run_async
from personae.models import Scenario, ScriptedServer
from personae.persona import Cast
from personae.store import Store
from personae.store.conversations import ConversationStore
from personae.tokens import exact_counter

if TYPE_CHECKING:
    from agents import Agent, OpenAIChatCompletionsModel


@pytest.fixture(scope="module", autouse=True)
def _no_tracing() -> None:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)  # no trace upload: the only server is the loopback one


def _exchange(n: int, question: str, log: str, answer: str) -> list[Any]:
    """One round of an Agents SDK session, as its items: the user's ``question``, a
    ``read_log`` call (id ``cN``) whose output is ``log``, and the assistant's ``answer``
    (message id ``msg_N``)."""
    call, arguments = f"c{n}", f'{{"n": {n}}}'
    return [
        {"role": "user", "content": question},
        {"type": "function_call", "call_id": call, "name": "read_log", "arguments": arguments},
        {"type": "function_call_output", "call_id": call, "output": log},
        {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
        },
    ]


HISTORY: list[Any] = [
    *_exchange(
        1, "Which tests failed last night?", "FAILED test_login " * 40, "test_login failed."
    ),
    *_exchange(2, "Why did it fail?", "timeout after 30s " * 40, "A timeout."),
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scenario = Scenario.model_validate({"rules": [{"text": "Raise the timeout to 60s."}]})
    with ScriptedServer(scenario) as running:
        yield running


@pytest.fixture
def conversations(tmp_path: Path) -> Iterator[ConversationStore]:
    store = Store(tmp_path / "personae.db")
    yield ConversationStore(store, exact_counter())
    store.close()


def chat_model(server: ScriptedServer) -> OpenAIChatCompletionsModel:
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=server.base_url, api_key="scripted")
    return OpenAIChatCompletionsModel(model=server.model_name, openai_client=client)


def problems(messages: list[dict[str, Any]]) -> list[str]:
    """What the chat completions API rejects with a 400: a tool message without its call."""
    out: list[str] = []
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if m["tool_call_id"] not in open_calls:
                out.append(f"tool message {i} answers no call ({m['tool_call_id']})")
            continue
        open_calls = {c["id"] for c in m.get("tool_calls") or []}
    return out


def run(agent: Agent[Any], text: str, session: Any, limit: int | None) -> None:
    from agents import RunConfig, Runner
    from agents.memory import SessionSettings

    config = RunConfig(session_settings=SessionSettings(limit=limit))
    result = run_async(Runner.run(agent, text, session=session, run_config=config))
    assert result.final_output == "Raise the timeout to 60s."


def test_sdk_session_limit_cuts_exchange_personae_session_keeps_it_whole(
    server: ScriptedServer, conversations: ConversationStore, tmp_path: Path
) -> None:
    from agents import Agent, SQLiteSession

    from personae.integrations.openai_agents import PersonaeSession

    agent = Agent(name="ops", instructions="You fix CI.", model=chat_model(server))
    theirs = SQLiteSession("night", str(tmp_path / "sdk.db"))
    run_async(theirs.add_items(list(HISTORY)))
    # The SDK's own session and limit: the latest 2 items start mid-exchange (an orphan
    # function_call_output, the reported failure) ...
    assert [i.get("type") for i in run_async(theirs.get_items(limit=2))] == [
        "function_call_output",
        "message",
    ]
    run(agent, "How do I fix it?", theirs, limit=2)
    sent = server.requests[-1]["messages"]
    # ... which the SDK 0.2x then deletes before sending: no 400, but the model gets the
    # answer "A timeout." with neither the call nor the log it came from.
    assert problems(sent) == []
    assert [m["role"] for m in sent] == ["system", "assistant", "user"]
    assert not any("timeout after 30s" in str(m.get("content")) for m in sent)

    ours = PersonaeSession("night", conversations)
    run_async(ours.add_items(list(HISTORY)))
    run(agent, "How do I fix it?", ours, limit=2)
    sent = server.requests[-1]["messages"]
    assert problems(sent) == []
    assert sent[0] == {"role": "system", "content": "You fix CI."}
    # The latest turn (question, call, log, answer) is kept whole, even over the limit.
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1] == {"role": "user", "content": "Why did it fail?"}
    assert "timeout after 30s" in sent[3]["content"]
    assert sent[-1] == {"role": "user", "content": "How do I fix it?"}
    # The new turn was stored in personae's store, in order, whole.
    stored = conversations.between(ours.store_session_id)
    assert [m.role for m in stored[-2:]] == ["user", "assistant"]
    assert "Raise the timeout to 60s." in stored[-1].content


def test_personae_session_fits_a_token_budget(
    server: ScriptedServer, conversations: ConversationStore
) -> None:
    from agents import SQLiteSession

    from personae.integrations.openai_agents import PersonaeSession

    sdk = SQLiteSession("budget")
    run_async(sdk.add_items(list(HISTORY)))
    counter = exact_counter()
    theirs = run_async(sdk.get_items(limit=4))  # an item limit does not bound tokens
    assert sum(counter.count(json.dumps(i)) for i in theirs) > 150
    ours = PersonaeSession("budget", conversations, budget=150)
    run_async(ours.add_items(list(HISTORY)))
    run_async(ours.add_items([{"role": "user", "content": "How do I fix it?"}]))
    items = run_async(ours.get_items())
    kept = [m for m in conversations.between(ours.store_session_id)]
    assert sum((m.tokens or 0) + 3 for m in kept) > 150  # the full history is over
    texts = [str(i.get("content") or i.get("output") or i.get("arguments")) for i in items]
    assert sum(counter.count(t) + 3 for t in texts) <= 150
    assert items[-1] == {"role": "user", "content": "How do I fix it?"}
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    assert calls == outputs  # whole exchanges only


def test_personae_session_round_trips_items_pop_and_clear(
    conversations: ConversationStore,
) -> None:
    from personae.integrations.openai_agents import PersonaeSession

    session = PersonaeSession("rt", conversations)
    run_async(session.add_items(list(HISTORY)))
    assert run_async(session.get_items()) == HISTORY
    assert run_async(session.pop_item()) == HISTORY[-1]
    again = PersonaeSession("rt", conversations)  # a new process sees the same state
    assert run_async(again.get_items()) == HISTORY[:-1]
    run_async(again.clear_session())
    assert run_async(PersonaeSession("rt", conversations).get_items()) == []


CAST = {
    "triage.md": "---\nname: triage\ndescription: Routes CI questions.\n"
    "tools: Read, Agent(fixer)\n---\n"
    "You route CI questions to the right specialist.\n",
    "fixer.md": "---\nname: fixer\ndescription: Fixes flaky tests.\ntools: Read, Bash\n"
    "disallowedTools: Bash\n---\nYou fix flaky tests. Never run commands.\n",
}


def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def run_shell(command: str) -> str:
    """Run a shell command."""
    raise AssertionError("a persona without run_shell must never reach it")


@pytest.fixture
def tool() -> Callable[[Callable[..., Any]], Any]:
    """The SDK's ``function_tool`` decorator."""
    from agents import function_tool

    return function_tool


def test_cast_personas_become_agents_with_handoffs(tmp_path: Path, tool: Any) -> None:
    from agents import Runner

    from personae.integrations.openai_agents import cast_agents

    for name, text in CAST.items():
        (tmp_path / ".claude/agents").mkdir(parents=True, exist_ok=True)
        (tmp_path / ".claude/agents" / name).write_text(text, encoding="utf-8")
    cast = Cast.load(tmp_path)
    scenario = Scenario.model_validate(
        {
            "steps": [
                {"tool_calls": [{"name": "transfer_to_fixer", "args": {}}]},
                {"text": "Retry the test with a longer timeout."},
            ]
        }
    )
    with ScriptedServer(scenario) as server:
        agents = cast_agents(cast, chat_model(server), tools=[tool(read_file), tool(run_shell)])
        assert [t.name for t in agents["triage"].tools] == ["read_file"]
        assert [t.name for t in agents["fixer"].tools] == ["read_file"]  # Bash disallowed
        assert [a.name for a in agents["triage"].handoffs] == ["fixer"]  # type: ignore[union-attr]
        result = run_async(Runner.run(agents["triage"], "test_login is flaky"))
        assert result.final_output == "Retry the test with a longer timeout."
        assert result.last_agent.name == "fixer"
        first, second = server.requests[0]["messages"], server.requests[1]["messages"]
    assert first[0] == {"role": "system", "content": cast.get("triage").system_prompt}
    assert second[0] == {"role": "system", "content": cast.get("fixer").system_prompt}
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert offered == {"read_file", "transfer_to_fixer"}


def test_handoffs_follow_spawn_rights_and_the_tool_cap_is_named(tmp_path: Path, tool: Any) -> None:
    from personae.integrations.openai_agents import cast_agents

    agents_dir = tmp_path / ".claude/agents"
    agents_dir.mkdir(parents=True)
    for name, text in CAST.items():
        (agents_dir / name).write_text(text, encoding="utf-8")
    agents = cast_agents(Cast.load(tmp_path), "gpt-4o", tools=[tool(read_file)])
    assert agents["fixer"].handoffs == []  # no agent tool: no handoffs
    # 165 more personas without a tools list (every tool, so the agent tool; no spawn
    # list): each would hand off to the 166 others, besides read_file
    for i in range(165):
        (agents_dir / f"p{i:03}.md").write_text(
            f"---\nname: p{i:03}\ndescription: Persona {i}.\n---\nYou are p{i:03}.\n"
        )
    with pytest.raises(ValueError, match=r"persona 'p000' would offer 167 tools and handoffs"):
        cast_agents(Cast.load(tmp_path), "gpt-4o", tools=[tool(read_file)])


# --- What the persona file says about running, against the scripted replay server ---

ECHO_SERVER = Path(__file__).resolve().parent / "_mcp_echo_server.py"
RUNNING_CAST = {
    "triage.md": "---\nname: triage\ndescription: Routes.\nmodel: inherit\n"
    "tools: Agent(checker)\n---\nYou are TRIAGE.\n",
    "checker.md": "---\nname: checker\ndescription: Checks the build.\n"
    "model: openai-compatible:checker-model\nmaxTurns: 2\ntools: [mcp__echo__ping]\n---\n"
    "You are CHECKER.\n",
}


def running_cast(root: Path) -> Cast:
    (root / ".claude/agents").mkdir(parents=True)
    for name, text in RUNNING_CAST.items():
        (root / ".claude/agents" / name).write_text(text, encoding="utf-8")
    servers = {"echo": {"command": sys.executable, "args": [str(ECHO_SERVER)]}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return Cast.load(root)


async def run_connected(agents: dict[str, Any], text: str) -> Any:
    from agents import Runner
    from agents.mcp import MCPServerManager

    from personae.integrations.openai_agents import mcp_servers

    async with MCPServerManager(mcp_servers(agents), strict=True):
        return await Runner.run(agents["triage"], text)


HANDOFF = {"tool_calls": [{"name": "transfer_to_checker", "args": {}}]}
PING = {"tool_calls": [{"name": "ping", "args": {}}]}


@pytest.mark.process  # the persona's MCP server is a Python child
def test_persona_model_max_turns_and_mcp_servers_reach_the_agents_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the handoff checker answers with its own model and its MCP server's granted
    tool (wipe is not offered); maxTurns: 2 stops its third call."""
    from agents import MaxTurnsExceeded

    from personae.integrations.openai_agents import cast_agents

    cast = running_cast(tmp_path)
    steps = [HANDOFF, PING, {"text": "The build is green."}]
    with ScriptedServer(Scenario.model_validate({"steps": steps})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        agents = cast_agents(cast, chat_model(server))
        result = run_async(run_connected(agents, "Is the build green?"))
        assert result.final_output == "The build is green."
        assert result.last_agent.name == "checker"
        models = [r["model"] for r in server.requests]
        assert models == [server.model_name, "checker-model", "checker-model"]
        offered = {t["function"]["name"] for t in server.requests[1]["tools"]}
        assert offered == {"ping"}  # wipe is not granted; checker hands off to none
        results = [m for m in server.requests[2]["messages"] if m["role"] == "tool"]
        assert results[-1]["content"] == "pong" or "pong" in json.dumps(results[-1]["content"])
    steps = [HANDOFF, PING, PING, PING, {"text": "never"}]
    with ScriptedServer(Scenario.model_validate({"steps": steps})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        agents = cast_agents(cast, chat_model(server))
        with pytest.raises(MaxTurnsExceeded, match="persona 'checker' has maxTurns: 2"):
            run_async(run_connected(agents, "Is the build green?"))
        assert len(server.requests) == 3  # triage's one, then checker's two


def test_a_large_cast_prints_handoffs_by_name(tmp_path: Path) -> None:
    """165 personas handing off to each other (a router to 120, a reviewer and every
    fourth specialist in a cycle): each agent prints in a few kilobytes."""
    from personae.integrations.openai_agents import cast_agents

    write_large_cast(tmp_path)
    agents = cast_agents(Cast.load(tmp_path), "gpt-4o")
    assert len(agents) == 165
    router = agents["router"]
    assert len(router.handoffs) == 120
    printed = repr(router)
    assert printed == str(router)
    assert printed.startswith("PersonaAgent(name='router', ")
    assert "handoffs=[<handoff to 's000'>, <handoff to 's001'>," in printed
    assert max(len(repr(a)) for a in agents.values()) < 10_000


def write_large_cast(root: Path) -> None:
    folder = root / ".claude/agents"
    folder.mkdir(parents=True)
    specialists = [f"s{i:03}" for i in range(163)]
    spawn = ", ".join(specialists[:120])
    head = "---\nname: {}\ndescription: {}.\ntools: {}\n---\nYou are {}.\n"
    (folder / "router.md").write_text(head.format("router", "Routes", f"Read, Agent({spawn})", "R"))
    (folder / "reviewer.md").write_text(
        head.format("reviewer", "Reviews", f"Read, Agent({', '.join(specialists[:40])})", "V")
    )
    for i, name in enumerate(specialists):
        tools = "Read, Grep" if i % 4 else f"Read, Agent(reviewer, {specialists[(i + 1) % 163]})"
        (folder / f"{name}.md").write_text(head.format(name, f"Specialist {i}", tools, name))
