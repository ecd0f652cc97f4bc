"""The pydantic-ai adapter, driven by FunctionModel (a scripted replay server, not a real one)."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from personae.tools import ToolCallRecord, ToolRegistry, ToolSubset, Workspace
from personae.tools.adapter import refused_calls


def _returns(messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    out: dict[str, ToolReturnPart] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    out[part.tool_call_id] = part
    return out


def test_agent_calls_allowed_disallowed_and_failing_tools(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    registry = ToolRegistry.builtin(Workspace(tmp_path))
    hook: list[ToolCallRecord] = []
    subset = registry.subset().narrow(["read_file", "grep"], on_call=hook.append)
    toolset = subset
    assert isinstance(toolset, ToolSubset)
    seen_tools: list[list[str]] = []
    seen_results: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen_tools.append(sorted(t.name for t in info.function_tools))
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("read_file", {"path": "notes.txt"}, tool_call_id="ok"),
                    ToolCallPart("run_shell", {"command": "rm -rf ."}, tool_call_id="denied"),
                    ToolCallPart("read_file", {"path": "../../etc/passwd"}, tool_call_id="fails"),
                ]
            )
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        seen_results.extend(str(getattr(p, "content", "")) for p in last.parts)
        return ModelResponse(parts=[TextPart("finished")])

    agent = Agent(FunctionModel(model), toolsets=[toolset])
    result = agent.run_sync("read my notes")

    assert result.output == "finished"
    # The model is only ever offered the subset's tools, with our schemas.
    assert seen_tools == [["grep", "read_file"], ["grep", "read_file"]]
    returns = _returns(result.all_messages())
    assert returns["ok"].content == "remember the milk\n"
    assert returns["ok"].outcome == "success"
    # Outside the subset: refused, and the model is told which tools exist.
    assert "Unknown tool name: 'run_shell'" in str(returns["denied"].content)
    assert "'read_file'" in str(returns["denied"].content)
    # A failing tool: a failed result with our message, not a crash.
    assert returns["fails"].outcome == "failed"
    assert "outside the workspace" in str(returns["fails"].content)
    assert any("outside the workspace" in r for r in seen_results)
    # Call log via the subset and the on_call hook (the refused call never reached dispatch).
    # pydantic-ai runs parallel tool calls concurrently, so completion order is not fixed.
    assert sorted((c.tool, c.ok) for c in subset.calls) == [
        ("read_file", False),
        ("read_file", True),
    ]
    assert hook == subset.calls
    failed = next(c for c in subset.calls if not c.ok)
    assert failed.error is not None and "outside the workspace" in failed.error
    refused = refused_calls(result.all_messages(), subset)
    assert [(r.tool, r.refused, r.canonical_args) for r in refused] == [
        ("run_shell", True, '{"command":"rm -rf ."}')
    ]
    assert (tmp_path / "notes.txt").exists()


def test_tool_errors_do_not_spend_retries(tmp_path: Path) -> None:
    """Repeated tool failures come back as failed results; the run still finishes."""
    registry = ToolRegistry.builtin(Workspace(tmp_path))
    subset = registry.subset(["read_file"])
    calls = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls <= 4:
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": f"missing{calls}.txt"})])
        return ModelResponse(parts=[TextPart("gave up")])

    result = Agent(FunctionModel(model), toolsets=[subset]).run_sync("go")
    assert result.output == "gave up"
    assert [c.ok for c in subset.calls] == [False] * 4
    assert all("no such file" in (c.error or "") for c in subset.calls)


def test_temp_workspace_child_through_the_adapter(tmp_path: Path) -> None:
    temp = tmp_path / "tmpws"
    temp.mkdir()
    parent = ToolRegistry.builtin(Workspace(tmp_path)).subset()
    child = parent.narrow(["write_file"]).with_workspace(Workspace(temp))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart("write_file", {"path": "out.txt", "content": "child"})]
            )
        return ModelResponse(parts=[TextPart("ok")])

    Agent(FunctionModel(model), toolsets=[child]).run_sync("write")
    assert (temp / "out.txt").read_text() == "child"
    assert not (tmp_path / "out.txt").exists()


def test_claude_alias_names_are_refused_and_reported(tmp_path: Path) -> None:
    """A model naming 'Bash' or 'Read' (Claude Code names) is refused by pydantic-ai even when
    the mapped tool is in the subset, and refused_calls reports it."""
    (tmp_path / "f.txt").write_text("data\n")
    subset = ToolRegistry.builtin(Workspace(tmp_path)).subset(["read_file", "run_shell"])

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("Bash", {"command": "touch made"}, tool_call_id="alias1"),
                    ToolCallPart("Read", {"path": "f.txt"}, tool_call_id="alias2"),
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    result = Agent(FunctionModel(model), toolsets=[subset]).run_sync("go")
    assert result.output == "done"
    assert subset.calls == []
    assert not (tmp_path / "made").exists()
    refused = refused_calls(result.all_messages(), subset)
    assert [(r.tool, r.refused) for r in refused] == [("Bash", True), ("Read", True)]
