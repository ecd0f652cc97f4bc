"""The team loop end to end: dispatch, budgets, involvement, synthesis.

Every test runs a real turn through ``personae.team.session.run_turn`` on a
real project folder (SQLite store, cast, built-in tools) with the in-process
scripted function model (it replays scenario steps; it is not a real model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _helpers import (
    attempt,
    one_subtask,
    plan,
    read,
    role_requests,
    run_async,
    run_team,
    synth,
    team_project,
    tool,
    verdict,
)
from _helpers import events_of as kinds
from personae.models import ModelResolver, Scenario, scripted_function_model
from personae.store import Store
from personae.store.runs import RunStore
from personae.team.session import RunOptions, run_turn


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The sample project (``config.yaml``, ``notes.md``) with the ``dev`` persona."""
    return team_project(tmp_path)


def test_zero_failure_session_validates_each_subtask_once(root: Path) -> None:
    outcome, player = run_team(
        root,
        [
            plan("Find the port", "Find the release day"),
            *attempt(read("config.yaml"), "config.yaml says port 8081.", verdict(True)),
            *attempt(read("notes.md"), "notes.md says Friday.", verdict(True)),
            synth("Port 8081, release on Friday."),
        ],
    )
    result = outcome
    assert result.status == "done"
    assert [o.status for o in result.subtasks] == ["validated", "validated"]
    assert result.failure_count == 0
    assert not kinds(outcome, "correction") and not kinds(outcome, "warning")
    # One structured validator call per subtask, no more.
    assert len(role_requests(player, "validator")) == 2
    levels = [e.data["involvement_level"] for e in kinds(outcome, "validation")]
    assert levels == ["standard", "standard"]
    assert result.answer == "Port 8081, release on Friday."


def test_failed_tool_is_decided_in_code_without_a_model_call(root: Path) -> None:
    failed = attempt(read("missing.txt"), "The file says hello.")
    # Retry with the error: the worker reads an existing file instead.
    retried = attempt(read("notes.md"), "notes.md says Friday.", verdict(True))
    outcome, player = run_team(root, one_subtask("Read the missing file", failed, retried))
    first = kinds(outcome, "validation")[0].to_json_dict()["data"]
    assert first["used_llm"] is False
    assert first["completion_signal"] == {
        "confidence": "none",
        "progress_made": False,
        "blocker_type": "tool_failure",
        "suggested_strategy": "escalate",
    }
    correction = kinds(outcome, "correction")[0]
    assert correction.data["blocker"] == "tool_failure"
    assert "missing.txt" in correction.message  # the retry carries the tool's error
    assert len(role_requests(player, "validator")) == 1  # only the second attempt used the model
    assert outcome.subtasks[0].status == "validated"


def test_hallucination_retry_names_the_tools(root: Path) -> None:
    rejected = verdict(False, blocker="hallucination", progress=False, strategy="retry")
    claimed = attempt(tool("grep", pattern="port"), "The port is 9999.", rejected)
    read_back = attempt(read("config.yaml"), "config.yaml: port 8081.", verdict(True))
    outcome, player = run_team(root, one_subtask("Find the port", claimed, read_back))
    correction = kinds(outcome, "correction")[0]
    assert correction.data["action"] == "retry"
    for name in ("read_file", "grep", "list_dir", "write_file"):
        assert name in correction.message
    # The retried worker sees the correction.
    retried = role_requests(player, "worker")[2]
    assert any("<correction>" in str(m["content"]) for m in retried["messages"])


@pytest.mark.parametrize(
    ("blocker", "action"),
    [("scope_drift", "rephrase"), ("tool_failure", "retry")],
)
def test_llm_blockers_dispatch_to_their_strategy(root: Path, blocker: str, action: str) -> None:
    rejected = verdict(False, blocker=blocker, strategy=action)
    drifted = attempt(read("config.yaml"), "port 8081 and I also edited notes.", rejected)
    approved = attempt(tool("grep", pattern="port"), "port 8081.", verdict(True))
    outcome, _ = run_team(root, one_subtask("Find the port", drifted, approved))
    assert [e.data["action"] for e in kinds(outcome, "correction")] == [action]
    if blocker == "scope_drift":
        assert "Stay strictly within this subtask" in kinds(outcome, "correction")[0].message


def test_partial_is_decomposed_by_the_manager(root: Path) -> None:
    partial = verdict(False, blocker="partial", strategy="decompose", issues=["host missing"])
    outcome, player = run_team(
        root,
        [
            plan("Find the port and the host"),
            *attempt(read("config.yaml"), "port 8081; host unknown.", partial),
            plan("Find the host"),  # the manager splits what remains
            *attempt(tool("grep", pattern="host"), "host is localhost.", verdict(True)),
            synth(),
        ],
    )
    assert kinds(outcome, "correction")[0].data["action"] == "decompose"
    decompose_request = role_requests(player, "manager")[1]
    assert any("host missing" in str(m["content"]) for m in decompose_request["messages"])
    assert outcome.subtasks[0].status == "validated"


def test_capability_gap_escalates_at_once_without_retry(root: Path) -> None:
    gap = verdict(False, blocker="capability_gap", progress=False, strategy="escalate")
    outcome, player = run_team(
        root,
        [
            plan("Deploy to production"),
            *attempt(tool("list_dir", path="."), "I cannot deploy: no deploy tool.", gap),
            {"when": {"role": "manager"}, "text": "unused"},
        ][:4],
    )
    assert len(role_requests(player, "worker")) == 2  # one attempt: tool call + answer
    assert not kinds(outcome, "correction")
    warning = kinds(outcome, "warning")[0]
    assert warning.data["action"] == "escalate"
    assert outcome.subtasks[0].status == "escalated"
    assert "Not completed" in outcome.answer
    assert "needs you" in outcome.answer


def test_loop_detected_in_code_skips_after_two_detections(root: Path) -> None:
    same = tool("grep", pattern="port")
    outcome, player = run_team(
        root,
        [
            plan("Find the port"),
            # The identical second call within the window is refused: a loop.
            *attempt([same, same], "port 8081"),
            *attempt(same, "port 8081"),  # the retry repeats it again: second detection
        ],
    )
    validations = kinds(outcome, "validation")
    signals = [v.to_json_dict()["data"]["completion_signal"] for v in validations]
    assert [s["blocker_type"] for s in signals] == ["loop", "loop"]
    assert all(v.data["used_llm"] is False for v in validations)
    assert [e.data["action"] for e in kinds(outcome, "correction")] == ["rephrase"]
    assert kinds(outcome, "warning")[0].data["action"] == "skip"
    assert outcome.subtasks[0].status == "skipped"
    # Nothing was validated, so the manager is not asked to synthesize anything.
    assert len(role_requests(player, "manager")) == 1


def _rejected_twice_then_ok(fact: str) -> list[dict[str, Any]]:
    rejected = verdict(False, blocker="hallucination", strategy="retry")
    return [
        *attempt(read("config.yaml"), f"{fact} (first try)", rejected),
        *attempt(tool("grep", pattern="port"), f"{fact} (second try)", rejected),
        *attempt(tool("list_dir", path="."), f"{fact} (third try)", verdict(True)),
    ]


def test_retry_budget_resets_for_each_subtask(root: Path) -> None:
    outcome, _ = run_team(
        root,
        [
            plan("Find the port", "Find the host"),
            *_rejected_twice_then_ok("port 8081"),
            *_rejected_twice_then_ok("host localhost"),
            synth(),
        ],
    )
    assert [o.status for o in outcome.subtasks] == ["validated", "validated"]
    assert [o.attempts for o in outcome.subtasks] == [3, 3]
    budgets = [(e.subtask, e.data["retries_used"]) for e in kinds(outcome, "correction")]
    assert budgets == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert outcome.failure_count == 4  # telemetry only


def _rejected_three_times(progress: bool) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for i in range(3):
        call = read("config.yaml") if i == 0 else tool("grep", pattern=f"p{i}")
        rejected = verdict(False, blocker="hallucination", progress=progress, confidence="low")
        steps += attempt(call, f"attempt {i}", rejected)
    return steps


def test_exhausted_budget_with_progress_continues_to_synthesis(root: Path) -> None:
    outcome, _ = run_team(root, one_subtask("Find the port", _rejected_three_times(True)))
    assert outcome.subtasks[0].status == "partial"
    assert "partial work" in kinds(outcome, "warning")[0].message
    assert "partial, not validated" in outcome.answer
    assert outcome.status == "partial"


def test_exhausted_budget_without_progress_skips_with_warning(root: Path) -> None:
    outcome, _ = run_team(
        root, one_subtask("Find the port", _rejected_three_times(False), answer=None)
    )
    assert outcome.subtasks[0].status == "skipped"
    warning = kinds(outcome, "warning")[0]
    assert "skipped" in warning.message and "no progress" in warning.message
    assert warning.message in outcome.warnings


def test_failure_in_subtask_one_does_not_raise_involvement_of_subtask_two(root: Path) -> None:
    outcome, player = run_team(
        root,
        [
            plan("Find the port", "Find the host"),
            *_rejected_twice_then_ok("port"),
            *attempt(read("config.yaml"), "host localhost", verdict(True)),
            synth(),
        ],
    )
    levels = [(e.subtask, e.data["involvement_level"]) for e in kinds(outcome, "validation")]
    assert set(levels) == {(1, "standard"), (2, "standard")}
    last_validator = role_requests(player, "validator")[-1]
    assert "Keyword rule suggests: standard" in last_validator["messages"][0]["content"]


def test_explicit_test_request_still_gets_thorough(root: Path) -> None:
    checked = attempt(read("config.yaml"), "port 8081 verified.", verdict(True))
    outcome, player = run_team(
        root,
        one_subtask("Check the port value", checked),
        task="Verify that the config sets port 8081.",
    )
    assert kinds(outcome, "validation")[0].data["involvement_level"] == "thorough"
    assert (
        "Keyword rule suggests: thorough"
        in role_requests(player, "validator")[0]["messages"][0]["content"]
    )


def test_information_only_request_is_minimal(root: Path) -> None:
    outcome, _ = run_team(
        root,
        one_subtask("Say hello", attempt([], "Hello!", verdict(True)), answer="Hello!"),
        task="What is this project about?",
    )
    validation = kinds(outcome, "validation")[0].data
    assert validation["involvement_level"] == "minimal"
    assert validation["used_llm"] is True  # no zero-tools rejection for information-only


def test_validator_infrastructure_error_is_neither_approval_nor_rejection(root: Path) -> None:
    rate_limited = {"when": {"role": "validator"}, "error": {"status": 429, "message": "slow down"}}
    # The second validator attempt works.
    reported = [*attempt(read("config.yaml"), "port 8081", rate_limited), verdict(True)]
    outcome, _ = run_team(root, one_subtask("Find the port", reported))
    assert not kinds(outcome, "correction")  # no retry budget spent
    assert "not counted as approval or rejection" in kinds(outcome, "warning")[0].message
    assert outcome.subtasks[0].status == "validated"
    assert outcome.failure_count == 0


def test_validator_down_keeps_work_unvalidated(root: Path) -> None:
    outcome, _ = run_team(
        root,
        one_subtask("Find the port", attempt(read("config.yaml"), "port 8081"), answer=None),
        rules=[{"when": {"role": "validator"}, "error": {"status": 503, "message": "down"}}],
    )
    assert outcome.subtasks[0].status == "unvalidated"
    assert not kinds(outcome, "correction")
    assert outcome.failure_count == 0
    assert "validator unavailable" in outcome.answer


def test_synthesis_never_claims_failed_work(root: Path) -> None:
    gap = verdict(False, blocker="capability_gap", progress=False)
    outcome, player = run_team(
        root,
        [
            plan("Find the port", "Deploy it"),
            *attempt(read("config.yaml"), "port 8081", verdict(True)),
            *attempt(tool("list_dir", path="."), "DEPLOYED-SUCCESSFULLY to prod", gap),
            synth("The port is 8081."),
        ],
    )
    synthesis = role_requests(player, "manager")[-1]
    text = "\n".join(str(m["content"]) for m in synthesis["messages"])
    assert "port 8081" in text
    assert "DEPLOYED-SUCCESSFULLY" not in text  # failed work never reaches the synthesis
    final = outcome.answer
    assert final.startswith("The port is 8081.")
    assert "Not completed:\n- [needs you] Deploy it" in final


def test_run_and_events_are_stored(root: Path) -> None:
    found = attempt(read("config.yaml"), "8081", verdict(True))
    outcome, _ = run_team(root, one_subtask("Find the port", found, answer="8081"))
    with Store(root / ".personae" / "state.db") as store:
        runs = RunStore(store)
        record = runs.get(outcome.run_id)
        assert record.status == "done" and record.final_text == "8081"
        stored = [e.kind for e in runs.events(outcome.run_id)]
        assert stored == [e.kind.value for e in outcome.events]
        assert stored[:2] == ["start", "plan"] and stored[-1] == "final"
        calls = runs.model_calls(outcome.run_id)
        assert [c.role for c in calls] == ["manager", "worker", "worker", "validator", "manager"]
        assert all(c.context_text and c.budget["budget"] > 0 for c in calls)
        assert runs.get(outcome.run_id[:-2]).id == outcome.run_id  # unique prefix


def test_run_usage_cap_stops_cleanly(root: Path) -> None:
    outcome, player = run_team(
        root,
        [plan("Find the port", "Find the host"), *attempt(read("config.yaml"), "port 8081")],
        request_cap=3,
    )
    assert len(player.requests) == 3  # the validator call was never sent
    assert [o.status for o in outcome.subtasks] == ["skipped", "skipped"]
    assert "request cap of 3" in kinds(outcome, "warning")[0].message
    assert "Not completed" in outcome.answer
    assert outcome.usage.requests == 3


def test_without_a_persona_the_worker_only_gets_read_only_tools(root: Path) -> None:
    steps = one_subtask("Look", attempt(tool("list_dir", path="."), "files listed", verdict(True)))
    model = scripted_function_model(Scenario.model_validate({"steps": steps}))
    options = RunOptions(root=root, include_git_log=False)
    outcome = run_async(
        run_turn("Give me the files.", options, resolver=ModelResolver.using(model, "scripted:t"))
    )
    assert outcome.status == "done"
    offered = {t["function"]["name"] for t in role_requests(model.player, "worker")[0]["tools"]}
    assert offered == {"read_file", "list_dir", "glob", "grep"}
