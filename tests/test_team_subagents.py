"""Sub-agents: verbatim prompt, narrowed tools enforced at dispatch, step budget,
temporary workspace, typed outcome, unknown names, depth cap, shared usage, context modes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _helpers import events_of as events
from _helpers import requests_with, run_async, tool_results
from _subagents import (
    READER,
    call,
    delegate,
    delegation,
    make_project,
    run,
    subagent_end,
    turn,
)
from personae.models import ModelResolver, Scenario, scripted_function_model
from personae.models.scenario import ROLE_MARKER
from personae.persona.model import ContextMode, Persona
from personae.team.events import EventBus
from personae.team.runtime import Runtime, TreeUsage
from personae.team.subagents import Parent, Spawner, child_prompt
from personae.tools.registry import ToolRegistry
from personae.tools.subset import ToolSubset
from personae.tools.workspace import Workspace


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The project with the lead and its sub-agent personas (:func:`make_project`)."""
    return make_project(tmp_path)


def test_child_gets_the_persona_prompt_verbatim_and_only_its_final_message_returns(
    root: Path,
) -> None:
    read = call("read_file", path="secret.txt")
    summary = "A short summary without the value."
    steps = delegation("reader", "Summarize secret.txt", "CHILD-READER", read, text=summary)
    outcome, player = run(root, turn(*steps))
    first_child = requests_with(player, "CHILD-READER")[0]
    system = [m["content"] for m in first_child["messages"] if m["role"] == "system"]
    assert system == [READER.split("---\n", 2)[2]]  # the body, verbatim, and nothing else
    assert not any(
        ROLE_MARKER.format(role="worker") in str(m["content"]) for m in first_child["messages"]
    )
    # The parent sees the typed outcome with the final message, not the child's tool output.
    parent_after = requests_with(player, ROLE_MARKER.format(role="worker"))[1]
    returned = json.loads(tool_results(parent_after)[-1])
    assert returned["final_message"] == "A short summary without the value."
    assert returned["status"] == "success" and returned["progress_made"] is True
    assert returned["context_mode"] == "isolated"
    assert "SECRET-CONTENT-42" not in json.dumps(parent_after)
    end = subagent_end(outcome)
    assert end.data["usage"]["requests"] == 2


def test_child_tool_subset_is_enforced_at_dispatch(root: Path) -> None:
    # reader lists only read_file: write_file is refused even though lead has it.
    write = call("write_file", path="x.txt", content="no")
    steps = delegation("reader", "Write a file", "CHILD-READER", write, text="could not write")
    outcome, player = run(root, turn(*steps))
    assert not (root / "x.txt").exists()
    first_child = requests_with(player, "CHILD-READER")[0]
    assert {t["function"]["name"] for t in first_child["tools"]} <= {"read_file", "final_result"}
    refused = [e for e in events(outcome, "tool_call") if e.data["tool"] == "write_file"]
    assert refused and refused[0].data["ok"] is False
    parent_after = requests_with(player, ROLE_MARKER.format(role="worker"))[1]
    assert json.loads(tool_results(parent_after)[-1])["status"] == "partial"


def test_each_call_gets_a_fresh_step_budget(root: Path) -> None:
    looping = {
        "when": {"contains": "CHILD-READER"},
        "tool_calls": [{"name": "read_file", "args": {"path": "secret.txt"}}],
    }
    outcome, _ = run(
        root,
        turn(delegate("reader", "first"), delegate("reader", "second")),
        rules=[looping],
    )
    ends = [e for e in events(outcome, "subagent") if e.data["phase"] == "end"]
    assert [e.data["status"] for e in ends] == ["limit", "limit"]
    assert [e.data["usage"]["requests"] for e in ends] == [2, 2]  # max_steps each time


def test_temp_workspace_exists_during_the_call_and_is_removed(root: Path) -> None:
    write = call("write_file", path="notes.txt", content="n")
    read = call("read_file", path="notes.txt")
    steps = delegation("scratch", "Take notes", "CHILD-SCRATCH", write, read, text="notes taken")
    outcome, _ = run(root, turn(*steps))
    reads = [e for e in events(outcome, "tool_call") if e.data["tool"] == "read_file"]
    assert reads[0].data["ok"] is True and "n" in reads[0].data["result"]
    assert not (root / "notes.txt").exists()  # written in the scratch folder, not the project
    end = subagent_end(outcome)
    assert end.data["temp_workspace"] and not Path(end.data["temp_workspace"]).exists()
    assert end.data["context_mode"] == "brief"


def test_temp_workspace_is_removed_on_error(root: Path) -> None:
    boom = {"status": 500, "message": "boom"}
    outcome, _ = run(root, turn(*delegation("scratch", "Take notes", "CHILD-SCRATCH", error=boom)))
    end = subagent_end(outcome)
    assert end.data["status"] == "failed"
    assert not Path(end.data["temp_workspace"]).exists()


def test_unknown_persona_name_lists_valid_names_and_closest(root: Path) -> None:
    _, player = run(root, turn(delegate("raeder", "Read it")))
    parent_after = requests_with(player, ROLE_MARKER.format(role="worker"))[1]
    returned = json.loads(tool_results(parent_after)[-1])
    assert returned["status"] == "failed"
    assert "did you mean 'reader'" in returned["error"]
    assert "lead, reader, relay, repo-researcher, researcher, scratch" in returned["error"]


def _spawner(root: Path, usage: TreeUsage, depth_cap: int = 2) -> tuple[Spawner, ToolSubset]:
    from personae.persona.cast import Cast

    cast = Cast.load(root)
    model = scripted_function_model(
        Scenario.model_validate({"rules": [{"text": "child done"}]}), label="scripted:t"
    )
    runtime = Runtime(
        models=ModelResolver.using(model, "scripted:t"), bus=EventBus("r"), usage=usage
    )
    box = ToolRegistry.builtin(Workspace(root)).subset(record=False)
    return Spawner(runtime=runtime, personas=cast.personas, depth_cap=depth_cap), box


def test_depth_is_capped(root: Path) -> None:
    spawner, box = _spawner(root, TreeUsage(), depth_cap=2)
    allowed = frozenset({"read_file", "agent"})
    deep = run_async(spawner.spawn("reader", "x", Parent(box=box, allowed=allowed, depth=2)))
    assert deep.status == "failed" and "depth cap of 2" in (deep.error or "")
    ok = run_async(spawner.spawn("relay", "x", Parent(box=box, allowed=allowed, depth=1)))
    assert ok.status == "success"  # runs, but at the cap it gets no agent tool
    player = spawner.runtime.models.fixed.player
    assert "agent" not in {t["function"]["name"] for t in player.requests[-1]["tools"]}


def test_usage_is_shared_across_the_tree_and_capped_per_run(root: Path) -> None:
    usage = TreeUsage(request_cap=1)
    spawner, box = _spawner(root, usage)
    allowed = frozenset({"read_file"})
    first = run_async(spawner.spawn("reader", "x", Parent(box=box, allowed=allowed, depth=0)))
    assert first.status == "success" and usage.requests == 1
    second = run_async(spawner.spawn("reader", "y", Parent(box=box, allowed=allowed, depth=0)))
    assert second.status == "limit" and "request cap of 1" in (second.error or "")
    assert usage.requests == 1


def test_context_modes(root: Path) -> None:
    from personae.context.snapshot import SnapshotOptions
    from personae.team.turn_context import TurnContext
    from personae.tokens.exact import exact_counter

    turn_ctx = TurnContext.build(
        root,
        SnapshotOptions(
            task="the user task",
            include_git_log=False,
            execution_block="PARENT-EXECUTION-BLOCK",
            persona="lead",
        ),
        counter=exact_counter("o200k_base"),
    )
    turn_ctx.add_tool_result("read_file", {"path": "a"}, "RECENT-TOOL-OUTPUT")
    isolated = child_prompt(ContextMode.ISOLATED, "T", turn_ctx)
    assert isolated == "<task>\nT\n</task>"
    brief = child_prompt(ContextMode.BRIEF, "T", turn_ctx)
    assert "DIRECTIVE-D" in brief and "RECENT-TOOL-OUTPUT" not in brief
    recent = child_prompt(ContextMode.SUMMARY_RECENT, "T", turn_ctx)
    assert "RECENT-TOOL-OUTPUT" in recent
    fork = child_prompt(ContextMode.FORK, "T", turn_ctx)
    # fork = the shared snapshot sections only: never the parent's execution block.
    assert "PARENT-EXECUTION-BLOCK" not in fork and "RECENT-TOOL-OUTPUT" in fork
    assert "DIRECTIVE-D" in fork and "the user task" not in fork
    assert Persona(name="p", description="d").context is ContextMode.BRIEF
