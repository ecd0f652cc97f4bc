"""Registry, effective tool names, narrow-only subsets enforced at dispatch, the call log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from _helpers import run_async
from personae.errors import ToolError, UnknownNameError, UsageError
from personae.persona.model import Persona
from personae.tools import (
    BUILTIN_TOOL_NAMES,
    Tool,
    ToolCallRecord,
    ToolContext,
    ToolRefusedError,
    ToolRegistry,
    ToolSubset,
    Workspace,
    effective_tool_names,
    unavailable_tool_names,
)

BUILTINS = [
    "edit_file",
    "glob",
    "grep",
    "list_dir",
    "read_file",
    "run_shell",
    "web_fetch",
    "write_file",
]


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    return ToolRegistry.builtin(Workspace(tmp_path))


def run(coro: Any) -> Any:
    return run_async(coro)


def test_registry_names_get_and_unknown(registry: ToolRegistry) -> None:
    assert registry.names() == BUILTINS
    assert registry.get("read_file").name == "read_file"
    assert registry.get("Read") is registry.get("read_file")  # Claude Code name mapped
    assert "Bash" in registry and "nope" not in registry
    with pytest.raises(UnknownNameError) as info:
        registry.get("read_fiel")
    assert info.value.closest == "read_file"
    assert "did you mean 'read_file'" in str(info.value)
    with pytest.raises(UsageError, match="already registered"):
        registry.register(registry.get("grep"))
    schema = registry.get("edit_file").parameters
    assert schema["type"] == "object" and "path" in schema["required"]


def test_effective_tool_names() -> None:
    def persona(**kw: Any) -> Persona:
        return Persona(name="p", description="d", **kw)

    assert effective_tool_names(persona(), BUILTINS) == BUILTINS
    assert effective_tool_names(persona(tools=["Read", "Grep", "Glob"]), BUILTINS) == [
        "glob",
        "grep",
        "read_file",
    ]
    p = persona(tools=["Read", "Bash", "WebSearch", "mcp__github__create_issue"])
    assert effective_tool_names(p, BUILTINS) == ["read_file", "run_shell"]
    assert unavailable_tool_names(p, BUILTINS) == ["WebSearch", "mcp__github__create_issue"]
    # disallowed wins; a pattern on a disallowed entry removes the whole tool
    p = persona(disallowed_tools=["Write", "Bash(rm:*)"])
    assert effective_tool_names(p, BUILTINS) == [
        n for n in BUILTINS if n not in ("write_file", "run_shell")
    ]
    # an allow entry restricted by a pattern cannot be enforced: not granted (fail closed)
    p = persona(tools=["Read", "Bash(git diff:*)"])
    assert effective_tool_names(p, BUILTINS) == ["read_file"]
    assert unavailable_tool_names(p, BUILTINS) == ["Bash(git diff:*)"]
    # only what is available, even with tools=None
    assert effective_tool_names(persona(), ["read_file", "grep"]) == ["grep", "read_file"]


def test_narrow_is_an_intersection_and_reports_drops(registry: ToolRegistry) -> None:
    parent = registry.subset(["read_file", "grep", "glob"])
    child = parent.narrow(["Read", "grep", "run_shell", "write_file", "agent"])
    assert child.names == ("grep", "read_file")
    assert child.dropped == ("run_shell", "write_file", "agent")
    assert child.get("grep") is parent.get("grep") is registry.get("grep")  # same instances
    grandchild = child.narrow(["glob", "read_file"])  # glob is the grandparent's, not the child's
    assert grandchild.names == ("read_file",)
    assert grandchild.dropped == ("glob",)
    assert parent.narrow(None).names == parent.names
    with pytest.raises(UnknownNameError, match="did you mean 'web_fetch'"):
        parent.narrow(["web_fetc"])
    with pytest.raises(UnknownNameError, match="did you mean 'grep'"):
        registry.subset(["grap"])


@settings(max_examples=100, deadline=None)
@given(
    st.sets(st.sampled_from(BUILTINS)),
    st.lists(st.sampled_from([*BUILTINS, "agent", "Read", "Bash", "LS"])),
    st.lists(st.sampled_from(BUILTINS)),
)
def test_property_narrowing_never_widens(
    tmp_path_factory: pytest.TempPathFactory,
    parent_names: set[str],
    wish: list[str],
    wish2: list[str],
) -> None:
    registry = ToolRegistry.builtin(Workspace(tmp_path_factory.getbasetemp()))
    parent = registry.subset(parent_names)
    child = parent.narrow(wish)
    assert set(child.names) <= set(parent.names)
    assert set(child.names) == set(parent.names) & {
        registry.get(w).name for w in wish if w in registry
    }
    assert set(child.narrow(wish2).names) <= set(child.names)
    assert set(child.with_workspace(parent.workspace).names) == set(child.names)


def test_dispatch_refuses_tools_outside_the_subset(registry: ToolRegistry, tmp_path: Path) -> None:
    seen: list[ToolCallRecord] = []
    child = registry.subset().narrow(["read_file", "list_dir"], on_call=seen.append)
    with pytest.raises(ToolRefusedError, match="'write_file' is not available to this agent"):
        run(child.dispatch("write_file", {"path": "x.txt", "content": "pwned"}))
    assert not (tmp_path / "x.txt").exists()  # the refused tool never ran
    with pytest.raises(ToolRefusedError, match="allowed: list_dir, read_file"):
        run(child.dispatch("Bash", {"command": "touch y"}))
    with pytest.raises(ToolRefusedError):
        run(child.dispatch("no_such_tool", {}))
    (tmp_path / "a.txt").write_text("hi")
    assert run(child.dispatch("read_file", {"path": "a.txt"})) == "hi"
    assert [(r.tool, r.ok, r.refused) for r in seen] == [
        ("write_file", False, True),
        ("Bash", False, True),
        ("no_such_tool", False, True),
        ("read_file", True, False),
    ]
    assert seen == child.calls
    assert seen[0].canonical_args == '{"content":"pwned","path":"x.txt"}'
    assert child.tools_used == ["read_file"]
    assert [c.tool for c in child.failed_calls] == ["write_file", "Bash", "no_such_tool"]
    assert seen[-1].to_dict()["result_preview"] == "hi"


def test_with_workspace_rebinds_to_a_temp_dir(registry: ToolRegistry, tmp_path: Path) -> None:
    temp = tmp_path / "scratch"
    temp.mkdir()
    parent = registry.subset(["write_file", "read_file"])
    child = parent.with_workspace(parent.workspace.with_root(temp))
    assert child.get("write_file") is parent.get("write_file")
    run(child.dispatch("write_file", {"path": "note.txt", "content": "in temp"}))
    assert (temp / "note.txt").read_text() == "in temp"
    assert not (tmp_path / "note.txt").exists()
    with pytest.raises(ToolError, match="outside the workspace"):
        run(child.dispatch("read_file", {"path": str(tmp_path / "scratch" / ".." / "x")}))
    assert parent.calls == []  # each subset keeps its own log


class _BoomArgs(BaseModel):
    n: int


def _boom(args: _BoomArgs, ctx: ToolContext) -> str:
    return str(1 // args.n)


def test_unexpected_exceptions_and_bad_args_become_tool_errors(registry: ToolRegistry) -> None:
    registry.register(Tool("divide", "1 // n", _BoomArgs, _boom))
    tools = registry.subset(["divide"])
    assert run(tools.dispatch("divide", {"n": 1})) == "1"
    with pytest.raises(ToolError, match="divide: failed: ZeroDivisionError"):
        run(tools.dispatch("divide", {"n": 0}))
    with pytest.raises(ToolError, match="invalid arguments: n: Input should be a valid integer"):
        run(tools.dispatch("divide", {"n": "many"}))
    assert [c.ok for c in tools.calls] == [True, False, False]
    assert isinstance(tools, ToolSubset)
    assert "divide" not in BUILTIN_TOOL_NAMES


def test_check_tool_names_for_personae_files() -> None:
    from personae.tools.names import require_tool_names, split_tool_spec

    assert split_tool_spec("Bash(git diff:*)") == ("run_shell", "git diff:*")
    assert split_tool_spec(" Read ") == ("read_file", None)
    assert require_tool_names(["Read", "read_file", "grep", "run_shell(git:*)"]) == [
        "read_file",
        "grep",
        "run_shell",
    ]
    with pytest.raises(UnknownNameError) as info:
        require_tool_names(["read_file", "web_fetc"], file="p.md", line=3)
    assert str(info.value).startswith(
        "p.md:3: tools: unknown tool 'web_fetc'; did you mean 'web_fetch'?"
    )


def test_limits_from_config_mapping() -> None:
    from personae.errors import ConfigError
    from personae.tools import ToolLimits

    limits = ToolLimits.from_dict({"shell_timeout": 5, "grep_max_results": None})
    assert limits.shell_timeout == 5.0 and limits.grep_max_results is None
    assert limits.read_max_bytes == ToolLimits().read_max_bytes
    with pytest.raises(UnknownNameError, match="did you mean 'shell_timeout'"):
        ToolLimits.from_dict({"shell_timout": 5}, file="config.yaml")
    with pytest.raises(ConfigError, match=r"config\.yaml: shell_max_output: "):
        ToolLimits.from_dict({"shell_max_output": "lots"}, file="config.yaml")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"read_max_bytes": -5}, "config.yaml: read_max_bytes: must be > 0 (or null for no limit)"),
        ({"shell_timeout": 0}, "config.yaml: shell_timeout: must be > 0 (or null for no limit)"),
        ({"shell_timeout": float("nan")}, "config.yaml: shell_timeout: must be a number, got NaN"),
        ({"shell_max_output": -1}, "config.yaml: shell_max_output: must be > 0"),
        ({"shell_grace": -0.5}, "config.yaml: shell_grace: must be >= 0, got -0.5"),
    ],
)
def test_negative_or_zero_limits_are_config_errors(data: dict[str, float], message: str) -> None:
    """A negative cap used to disable it silently (read_file then read whole lines unbounded)."""
    from personae.errors import ConfigError
    from personae.tools import ToolLimits

    with pytest.raises(ConfigError) as info:
        ToolLimits.from_dict(data, file="config.yaml")
    assert str(info.value).startswith(message)
    with pytest.raises(ConfigError):
        ToolLimits(**data)  # type: ignore[arg-type]
    assert ToolLimits(shell_grace=0, preview_chars=0).shell_grace == 0


def test_a_subset_cut_without_a_log_still_dispatches_and_its_children_keep_no_log(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """The team's subset: a recording wrapper logs its calls, so the subset keeps none."""
    (tmp_path / "a.txt").write_text("hi")
    seen: list[ToolCallRecord] = []
    child = registry.subset(record=False).narrow(["read_file"], on_call=seen.append)
    assert run(child.dispatch("read_file", {"path": "a.txt"})) == "hi"
    with pytest.raises(ToolRefusedError):
        run(child.dispatch("write_file", {"path": "b.txt", "content": "x"}))
    assert child.calls == [] and seen == []
    assert not (tmp_path / "b.txt").exists()
    logged = registry.subset()
    run(logged.dispatch("read_file", {"path": "a.txt"}))
    assert [c.tool for c in logged.calls] == ["read_file"]


def test_one_record_type_for_subsets_and_the_team() -> None:
    """The worker's event keeps the team's fields only; the subset's record has them all."""
    from personae.team.signals import WorkerResult

    record = ToolCallRecord.made(
        "read_file", {"path": "x"}, ok=False, text="no such file", persona="p", started=0.0
    )
    assert record.error == "no such file" and record.result == "no such file"
    assert record.canonical_args == '{"path":"x"}'
    assert set(record.brief()) == {"tool", "args", "ok", "result", "persona", "reused", "refused"}
    work = WorkerResult(success=False, result="", failed_tools=[record])
    assert work.failed_tools[0] is record
