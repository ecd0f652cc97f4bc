"""personae[pydantic-ai] against the real pydantic-ai (FunctionModel: its own offline model)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, UsageLimitExceeded
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    repair_messages,
)
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from personae.integrations.pydantic_ai import FitHistory, count_model_messages, persona_agent
from personae.models import Scenario, ScriptedServer
from personae.persona import Cast

SYSTEM = "You are the release assistant."


def problems(messages: list[ModelMessage]) -> list[str]:
    """Tool returns whose call is not in the response just before (what providers reject)."""
    out: list[str] = []
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            open_calls = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_call_id not in open_calls:
                out.append(f"orphan tool return {part.tool_call_id} in message {i}")
        open_calls = set()
    return out


def history() -> list[ModelMessage]:
    return [
        ModelRequest(
            parts=[SystemPromptPart(SYSTEM), UserPromptPart("What failed in last night's build?")]
        ),
        ModelResponse(parts=[ToolCallPart("read_log", {"night": 1}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("read_log", "E_LINK " * 400, tool_call_id="c1")]),
        ModelResponse(parts=[ToolCallPart("read_log", {"night": 2}, tool_call_id="c2")]),
        ModelRequest(parts=[ToolReturnPart("read_log", "E_TEST " * 400, tool_call_id="c2")]),
        ModelResponse(parts=[TextPart("The link step failed, then a test.")]),
    ]


class Recorder:
    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.tools: list[list[str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tools.append(sorted(t.name for t in info.function_tools))
        return ModelResponse(parts=[TextPart("ok")])


def keep_recent_messages(messages: list[ModelMessage]) -> list[ModelMessage]:
    """pydantic-ai's documented history processor ("Keep Only Recent Messages")."""
    return messages[-5:] if len(messages) > 5 else messages


def test_documented_keep_recent_processor_vs_personae() -> None:
    question = ModelRequest(parts=[UserPromptPart("And how do I fix it?")])
    # The documented recipe cuts an exchange in half (the reported orphan) ...
    sliced = keep_recent_messages([*history(), question])
    assert problems(sliced) == ["orphan tool return c1 in message 0"]
    # ... which pydantic-ai 2.6x now repairs before each request by deleting the result,
    # so the model gets no 400 but silently loses the c1 result, the system prompt and
    # the original task, and nothing bounds its size in tokens.
    assert problems(repair_messages(sliced)) == []
    recorder = Recorder()
    agent = Agent(FunctionModel(recorder), capabilities=[ProcessHistory(keep_recent_messages)])
    agent.run_sync("And how do I fix it?", message_history=history())
    theirs = recorder.seen[-1]
    assert not any(isinstance(p, SystemPromptPart) for m in theirs for p in m.parts)
    assert not any(
        isinstance(p, UserPromptPart) and "last night" in str(p.content)
        for m in theirs
        for p in m.parts
    )
    assert count_model_messages(theirs, model="gpt-4o") > 700

    recorder = Recorder()
    fit = FitHistory(700, model="gpt-4o")
    agent = Agent(FunctionModel(recorder), capabilities=[ProcessHistory(fit)])
    agent.run_sync("And how do I fix it?", message_history=history())
    ours = recorder.seen[-1]
    assert problems(ours) == []
    assert count_model_messages(ours, model="gpt-4o") <= 700
    assert count_model_messages([*history(), ours[-1]], model="gpt-4o") > 700
    first = ours[0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)
    last = ours[-1]
    assert isinstance(last, ModelRequest)
    assert [p.content for p in last.parts if isinstance(p, UserPromptPart)] == [
        "And how do I fix it?"
    ]
    # the earlier turn did not fit whole: it is kept from its question on, its tool
    # outputs shortened with a notice (or left out whole when even that is too big)
    assert fit.last is not None and fit.last.fits and (fit.last.dropped or fit.last.shrunk)


def test_history_processor_shortens_latest_turn_tool_output_exactly() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart(SYSTEM), UserPromptPart("Summarize the log.")]),
        ModelResponse(parts=[ToolCallPart("read_log", {}, tool_call_id="big")]),
        ModelRequest(parts=[ToolReturnPart("read_log", "trace line\n" * 3000, tool_call_id="big")]),
    ]
    fit = FitHistory(400)
    out = fit(messages)
    assert problems(out) == []
    assert count_model_messages(out) <= 400
    returned = out[-1].parts[0]
    assert isinstance(returned, ToolReturnPart)
    assert "[output shortened to fit the budget" in str(returned.content)
    assert fit.last is not None and fit.last.shrunk == 1


PERSONA = """---
name: reviewer
description: Reviews release notes.
tools: Read, Grep
---
You review release notes. Quote the file you read.
"""


def test_persona_becomes_agent_with_prompt_verbatim_and_narrowed_tools(tmp_path: Path) -> None:
    (tmp_path / ".claude/agents").mkdir(parents=True)
    (tmp_path / ".claude/agents/reviewer.md").write_text(PERSONA, encoding="utf-8")
    persona = Cast.load(tmp_path).get("reviewer")
    writes: list[str] = []
    parent = FunctionToolset[Any]()

    @parent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    @parent.tool_plain
    def grep(pattern: str) -> str:
        """Search files."""
        return pattern

    @parent.tool_plain
    def write_file(path: str, text: str) -> str:
        """Write a file."""
        writes.append(path)
        return "written"

    calls = iter(
        [
            ModelResponse(parts=[ToolCallPart("write_file", {"path": "x", "text": "y"}, "w1")]),
            ModelResponse(parts=[ToolCallPart("read_file", {"path": "NOTES.md"}, "r1")]),
            ModelResponse(parts=[TextPart("Notes look fine.")]),
        ]
    )
    seen: list[list[ModelMessage]] = []
    offered: list[list[str]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        offered.append(sorted(t.name for t in info.function_tools))
        return next(calls)

    agent = persona_agent(persona, FunctionModel(scripted), toolsets=[parent])
    result = agent.run_sync("Review the notes.")
    assert result.output == "Notes look fine."
    assert offered[0] == ["grep", "read_file"]  # narrowed: write_file is not offered
    first = seen[0][-1]
    assert isinstance(first, ModelRequest)
    assert first.instructions == persona.system_prompt.strip()  # pydantic-ai strips ends
    assert writes == []  # the hidden tool was refused at dispatch, never ran
    refused = [
        p
        for m in seen[1]
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart) and p.tool_call_id == "w1"
    ]
    assert len(refused) == 1
    assert "Unknown tool name: 'write_file'" in str(refused[0].content)
    returns = [p for m in seen[2] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[-1].content == "contents of NOTES.md"


TRIAGE = """---
name: triage
description: Routes questions.
tools: []
---
You are TRIAGE. Route the question.
"""


def test_prompt_is_sent_with_a_stored_history_and_after_a_handoff(tmp_path: Path) -> None:
    """pydantic-ai sends a system_prompt only when there is no message history; the
    persona's prompt goes as instructions, so every request carries its own persona's."""
    (tmp_path / ".claude/agents").mkdir(parents=True)
    (tmp_path / ".claude/agents/reviewer.md").write_text(PERSONA, encoding="utf-8")
    (tmp_path / ".claude/agents/triage.md").write_text(TRIAGE, encoding="utf-8")
    cast = Cast.load(tmp_path)
    sent: list[tuple[str | None, list[str]]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        system = [p.content for m in messages for p in m.parts if isinstance(p, SystemPromptPart)]
        sent.append((info.instructions, system))
        return ModelResponse(parts=[TextPart("ok")])

    model = FunctionModel(scripted)
    triage = persona_agent(cast.get("triage"), model)
    first = triage.run_sync("Is the release blocked?")
    reviewer = persona_agent(cast.get("reviewer"), model)
    # the handoff: the reviewer continues the triage's conversation
    reviewer.run_sync("Review the notes.", message_history=first.all_messages())
    # a stored history given again to the same persona
    reviewer.run_sync("And the changelog?", message_history=first.all_messages())
    assert sent[0] == (cast.get("triage").system_prompt.strip(), [])
    for instructions, system in sent[1:]:
        assert instructions == cast.get("reviewer").system_prompt.strip()
        assert "You are TRIAGE" not in " ".join(system) + (instructions or "")


# --- What the persona file says about running, against the scripted replay server ---

ECHO_SERVER = Path(__file__).resolve().parent / "_mcp_echo_server.py"
CHECKER = """---
name: checker
description: Checks the build.
model: openai-compatible:checker-model
maxTurns: 2
tools: [mcp__echo__ping]
mcpServers: [echo]
---
You are CHECKER.
"""
WRITER = """---
name: writer
description: Writes the release notes.
model: inherit
---
You are WRITER.
"""


def replay_project(root: Path) -> Cast:
    (root / ".claude/agents").mkdir(parents=True)
    (root / ".claude/agents/checker.md").write_text(CHECKER, encoding="utf-8")
    (root / ".claude/agents/writer.md").write_text(WRITER, encoding="utf-8")
    servers = {"echo": {"command": sys.executable, "args": [str(ECHO_SERVER)]}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return Cast.load(root)


@pytest.fixture
def replay_allowed() -> Iterator[None]:
    """Requests may go out: only to the scripted replay server on 127.0.0.1."""
    with override_allow_model_requests(True):
        yield


def ping_steps(calls: int) -> list[dict[str, Any]]:
    call = {"tool_calls": [{"name": "mcp__echo__ping", "args": {}}]}
    return [call] * calls + [{"text": "The build is green."}]


@pytest.mark.process  # the persona's MCP server is a Python child
def test_persona_model_max_turns_and_mcp_servers_reach_pydantic_ai(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replay_allowed: None
) -> None:
    """checker's own model answers (not the default), its MCP server's granted tool is
    offered and called (wipe is not offered), and maxTurns: 2 stops the third request."""
    cast = replay_project(tmp_path)
    with ScriptedServer(Scenario.model_validate({"steps": ping_steps(1)})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        default = server.model()
        checker = persona_agent(cast.get("checker"), default, mcp_servers=cast.mcp_servers)
        result = checker.run_sync("Is the build green?")
        assert result.output == "The build is green."
        assert [r["model"] for r in server.requests] == ["checker-model", "checker-model"]
        offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
        assert offered == {"mcp__echo__ping"}  # wipe is not granted
        results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in results] == ["pong"]  # the real server answered
    with ScriptedServer(Scenario.model_validate({"steps": ping_steps(3)})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        checker = persona_agent(cast.get("checker"), server.model(), mcp_servers=cast.mcp_servers)
        with pytest.raises(UsageLimitExceeded, match="request_limit of 2"):
            checker.run_sync("Is the build green?")
        assert len(server.requests) == 2  # maxTurns: 2, not the 4 the scenario would take


@pytest.mark.process  # the persona's MCP server is a Python child
def test_max_turns_and_models_hold_with_message_history_and_a_handoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replay_allowed: None
) -> None:
    """checker runs, writer continues its conversation (message_history: the handoff) with
    the default model, then checker runs again on the stored history: each run keeps its
    persona's model, prompt and request limit (counted per run)."""
    cast = replay_project(tmp_path)
    steps = [*ping_steps(1), {"text": "Notes written."}, *ping_steps(1)]
    with ScriptedServer(Scenario.model_validate({"steps": steps})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        default = server.model()
        checker = persona_agent(cast.get("checker"), default, mcp_servers=cast.mcp_servers)
        writer = persona_agent(cast.get("writer"), default, mcp_servers=cast.mcp_servers)
        first = checker.run_sync("Is the build green?")
        handed = writer.run_sync("Write the notes.", message_history=first.all_messages())
        assert handed.output == "Notes written."
        again = checker.run_sync("Still green?", message_history=handed.all_messages())
        assert again.output == "The build is green."
        models = [r["model"] for r in server.requests]
        assert models == ["checker-model"] * 2 + [server.model_name] + ["checker-model"] * 2
        systems = [r["messages"][0]["content"] for r in server.requests]
        assert [s.split(".")[0] for s in systems] == ["You are CHECKER"] * 2 + [
            "You are WRITER"
        ] + ["You are CHECKER"] * 2
        assert "tools" not in server.requests[2]  # writer has no MCP server of its own


def test_a_persona_server_that_is_not_configured_is_named(tmp_path: Path) -> None:
    cast = replay_project(tmp_path)
    with pytest.raises(ValueError, match=r"persona 'checker': MCP server 'echo' is not configured"):
        persona_agent(cast.get("checker"), "test")
    (tmp_path / ".claude/agents/bad.md").write_text(
        "---\nname: bad\ndescription: d\nmodel: gpt4\n---\nx\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"persona 'bad': .*provider:name"):
        persona_agent(Cast.load(tmp_path).get("bad"))
