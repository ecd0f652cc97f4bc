"""Context alignment across the team: directive, history, tool results, persona validation context.

Runs real turns (SQLite conversation store, context engine, built-in tools)
with the in-process scripted function model and inspects what each role was sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _helpers import build_project, run_scenario
from personae.models.scenario import ROLE_MARKER
from personae.team.result import RunResult

PERSONA = """---
name: dev
description: Works on the sample project.
tools: [read_file, grep]
constraints:
  mandatory_steps: [Quote the file you used]
  validation_guidance: GUIDANCE-XYZ every fact needs a quoted file.
---
You are dev, EXECUTION-PROMPT-ABC. Use your tools.
"""


def make_project(root: Path, directive: str) -> Path:
    files = {".personae/directive.md": directive, "config.yaml": "port: 8081\n"}
    return build_project(root, {"dev": PERSONA}, files)


def one_subtask(fact: str, *, final: str) -> list[dict[str, Any]]:
    ok = {
        "approved": True,
        "requirements_met": True,
        "issues": [],
        "next_action": "",
        "completion_signal": {"confidence": "high", "progress_made": True},
    }
    return [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": fact}]}},
        {"when": {"role": "worker"}, "tool_calls": [{"name": "grep", "args": {"pattern": "port"}}]},
        {"when": {"role": "worker"}, "text": f"{fact}: port 8081 (config.yaml)"},
        {"when": {"role": "validator"}, "output": ok},
        {"when": {"role": "manager"}, "text": final},
    ]


def run(
    root: Path, steps: list[dict[str, Any]], task: str, session: str = "s1"
) -> tuple[RunResult[Any], Any]:
    summarize = {"when": {"role": "summarizer"}, "text": "MODEL-SUMMARY of earlier turns"}
    return run_scenario(root, steps, task, rules=[summarize], session=session)


def sent(player: Any, role: str) -> list[str]:
    """The full text each request of ``role`` carried."""
    marker = ROLE_MARKER.format(role=role)
    texts = ["\n".join(str(m.get("content")) for m in r["messages"]) for r in player.requests]
    return [t for t in texts if marker in t]


def test_directive_reaches_all_roles_and_refreshes_between_turns(tmp_path: Path) -> None:
    root = make_project(tmp_path, "Never modify files outside the workspace. DIRECTIVE-V1")
    _, player = run(root, one_subtask("Find the port", final="8081"), "Give me the port.")
    for role in ("manager", "worker", "validator"):
        assert all("DIRECTIVE-V1" in t for t in sent(player, role)), role
    (root / ".personae" / "directive.md").write_text("Answer in one line. DIRECTIVE-V2")
    _, player = run(root, one_subtask("Find the port again", final="8081"), "Port again?")
    for role in ("manager", "worker", "validator"):
        texts = sent(player, role)
        assert texts and all("DIRECTIVE-V2" in t and "DIRECTIVE-V1" not in t for t in texts)


def test_assistant_history_is_visible_to_worker_and_validator(tmp_path: Path) -> None:
    root = make_project(tmp_path, "Be brief.")
    run(
        root,
        one_subtask("Choose a format", final="We commit to YAML configs (COMMITMENT-123)."),
        "Which config format do we use?",
    )
    _, player = run(root, one_subtask("Add a setting", final="done"), "Add a timeout setting.")
    for role in ("worker", "validator"):
        assert all("COMMITMENT-123" in t for t in sent(player, role)), role
    # Another session does not see it.
    _, other = run(root, one_subtask("Add a setting", final="done"), "Add it.", session="s2")
    assert not any("COMMITMENT-123" in t for t in sent(other, "worker"))


def test_tool_results_of_earlier_subtasks_are_visible_and_not_repeated(tmp_path: Path) -> None:
    root = make_project(tmp_path, "Be brief.")
    ok = {
        "approved": True,
        "requirements_met": True,
        "issues": [],
        "completion_signal": {"confidence": "high", "progress_made": True},
    }
    read = {"name": "read_file", "args": {"path": "config.yaml"}}
    steps = [
        {"when": {"role": "manager"},
         "output": {"subtasks": [{"description": "Read config"}, {"description": "Use port"}]}},
        {"when": {"role": "worker"}, "tool_calls": [read]},
        {"when": {"role": "worker"}, "text": "config.yaml read"},
        {"when": {"role": "validator"}, "output": ok},
        {"when": {"role": "worker"}, "tool_calls": [read]},  # the same call again
        {"when": {"role": "worker"}, "text": "port is 8081"},
        {"when": {"role": "validator"}, "output": ok},
        {"when": {"role": "manager"}, "text": "8081"},
    ]  # fmt: skip
    outcome, player = run(root, steps, "Read the config and tell me the port.")
    second_worker = sent(player, "worker")[2]
    assert "port: 8081" in second_worker  # subtask 1's tool result is in subtask 2's context
    calls = [e for e in outcome.events if e.kind.value == "tool_call"]
    assert [c.data["reused"] for c in calls] == [False, True]  # not run a second time
    assert outcome.status == "done"


def test_validation_context_reaches_the_validator_only(tmp_path: Path) -> None:
    root = make_project(tmp_path, "Be brief.")
    _, player = run(root, one_subtask("Find the port", final="8081"), "Give me the port.")
    assert all("GUIDANCE-XYZ" in t for t in sent(player, "validator"))
    assert all("Quote the file you used" in t for t in sent(player, "validator"))
    for role in ("manager", "worker"):
        assert not any("GUIDANCE-XYZ" in t for t in sent(player, role)), role
    # The execution prompt goes to the worker, never to the validator.
    assert all("EXECUTION-PROMPT-ABC" in t for t in sent(player, "worker"))
    assert not any("EXECUTION-PROMPT-ABC" in t for t in sent(player, "validator"))


def test_shared_sections_are_identical_across_roles(tmp_path: Path) -> None:
    root = make_project(tmp_path, "Shared directive text.")
    _, player = run(root, one_subtask("Find the port", final="8081"), "Give me the port.")

    def section(text: str, tag: str) -> str:
        return text[text.index(f"<{tag}>") : text.index(f"</{tag}>")]

    texts = [sent(player, r)[0] for r in ("manager", "worker", "validator")]
    assert len({section(t, "directive") for t in texts}) == 1
    assert len({section(t, "task") for t in texts}) == 1


def test_long_sessions_fold_older_messages_into_a_summary(tmp_path: Path) -> None:
    root = make_project(tmp_path, "Be brief.")
    for i in range(3):
        _, player = run(root, one_subtask(f"Step {i}", final=f"ANSWER-{i}"), f"QUESTION-{i}?")
    manager = sent(player, "manager")[0]
    # Path A: what left the recent window is summarized, the rest is recent messages.
    summary = manager[
        manager.index("<conversation_summary>") : manager.index("</conversation_summary>")
    ]
    assert "MODEL-SUMMARY" in summary  # the model's condensed summary (path A) ...
    asked = sent(player, "summarizer")
    assert asked and "QUESTION-0" in asked[-1]  # ... of what left the recent window
    assert "ANSWER-1" in manager
