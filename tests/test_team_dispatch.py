"""Strategy dispatch, loop detection, involvement levels and deterministic validation checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from personae.team.dispatch import StepAction, SubtaskBudget, next_step
from personae.team.involvement import involvement_for
from personae.team.loop import involvement_for_subtask
from personae.team.loopdetect import LoopDetector
from personae.team.signals import (
    BlockerType,
    CompletionSignal,
    Confidence,
    InvolvementLevel,
    Strategy,
    ValidationResult,
    WorkerResult,
)
from personae.team.validator import deterministic_checks
from personae.tools.records import ToolCallRecord

WORK = WorkerResult(success=True, result="done", tools_used=["grep"],
                    tool_calls=[ToolCallRecord(tool="grep", args={"pattern": "x"})])  # fmt: skip


def rejected(
    blocker: BlockerType | None, *, progress: bool = False, strategy: Strategy | None = None
) -> ValidationResult:
    return ValidationResult(
        approved=False,
        requirements_met=False,
        issues=["problem"],
        completion_signal=CompletionSignal(
            confidence=Confidence.LOW,
            progress_made=progress,
            blocker_type=blocker,
            suggested_strategy=strategy,
        ),
    )


@pytest.mark.parametrize(
    ("blocker", "action"),
    [
        (BlockerType.HALLUCINATION, StepAction.RETRY),
        (BlockerType.TOOL_FAILURE, StepAction.RETRY),
        (BlockerType.PARTIAL, StepAction.DECOMPOSE),
        (BlockerType.SCOPE_DRIFT, StepAction.REPHRASE),
        (BlockerType.LOOP, StepAction.REPHRASE),
        (BlockerType.CAPABILITY_GAP, StepAction.ESCALATE),
    ],
)
def test_each_blocker_maps_to_its_strategy(blocker: BlockerType, action: StepAction) -> None:
    budget = SubtaskBudget(max_retries=2)
    decision = next_step(rejected(blocker), WORK, budget, subtask="s", tools_to_use=["grep"])
    assert budget.retries_used == 0  # next_step is pure: the new state is on the decision
    budget = decision.budget
    assert decision.action is action
    spends = action in (StepAction.RETRY, StepAction.REPHRASE, StepAction.DECOMPOSE)
    assert budget.retries_used == (1 if spends else 0)
    if action is StepAction.ESCALATE:
        assert decision.warning and "needs you" in decision.warning


def test_hallucination_instruction_names_the_tools() -> None:
    decision = next_step(
        rejected(BlockerType.HALLUCINATION), WORK, SubtaskBudget(), subtask="s",
        tools_to_use=["read_file", "grep"],
    )  # fmt: skip
    assert "read_file, grep" in decision.instruction


def test_tool_failure_retries_at_most_twice_then_rephrases_then_stops() -> None:
    failed = WORK.model_copy(
        update={"failed_tools": [ToolCallRecord(tool="read_file", ok=False, result="no such file")]}
    )
    budget = SubtaskBudget(max_retries=5)
    actions = []
    for _ in range(3):
        rejection = rejected(BlockerType.TOOL_FAILURE)
        actions.append(next_step(rejection, failed, budget, subtask="s", tools_to_use=[]))
        budget = actions[-1].budget
    assert [a.action for a in actions] == [StepAction.RETRY, StepAction.REPHRASE, StepAction.SKIP]
    assert "no such file" in actions[0].instruction


def test_code_detected_loop_overrides_the_validator_and_skips_after_two() -> None:
    looping = WORK.model_copy(update={"loop_detected": True})
    budget = SubtaskBudget(max_retries=5)
    says_fine = rejected(BlockerType.PARTIAL, progress=True)
    first = next_step(says_fine, looping, budget, subtask="s", tools_to_use=[])
    second = next_step(says_fine, looping, first.budget, subtask="s", tools_to_use=[])
    assert (first.action, second.action) == (StepAction.REPHRASE, StepAction.SKIP)
    assert second.warning and "loop" in second.warning


@pytest.mark.parametrize(
    ("progress", "action"), [(True, StepAction.CONTINUE), (False, StepAction.SKIP)]
)
def test_exhaustion(progress: bool, action: StepAction) -> None:
    budget = SubtaskBudget(max_retries=1, retries_used=1)
    decision = next_step(
        rejected(BlockerType.HALLUCINATION, progress=progress), WORK, budget, subtask="s",
        tools_to_use=[],
    )  # fmt: skip
    assert decision.action is action
    assert decision.warning


@given(
    st.lists(
        st.tuples(
            st.sampled_from([*BlockerType, None]),
            st.booleans(),
            st.booleans(),
            st.sampled_from([*Strategy, None]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=0, max_value=4),
)
def test_budget_is_never_exceeded_and_every_subtask_ends(
    signals: list[tuple[BlockerType | None, bool, bool, Strategy | None]], max_retries: int
) -> None:
    budget = SubtaskBudget(max_retries=max_retries)
    spent = 0
    ended = False
    for blocker, progress, loop, strategy in signals:
        work = WORK.model_copy(update={"loop_detected": loop})
        decision = next_step(
            rejected(blocker, progress=progress, strategy=strategy), work, budget, subtask="s",
            tools_to_use=[],
        )  # fmt: skip
        budget = decision.budget
        spent += decision.action in (StepAction.RETRY, StepAction.REPHRASE, StepAction.DECOMPOSE)
        assert budget.retries_used == spent <= max_retries
        if decision.action in (StepAction.SKIP, StepAction.ESCALATE, StepAction.CONTINUE):
            ended = True
            assert decision.warning  # every way out without approval is visible
            break
    # With the budget used up, the next rejection always ends the subtask.
    assert ended or spent < max_retries or len(signals) == spent


def test_loop_detector_window() -> None:
    detector = LoopDetector(window=2)
    assert not detector.observe("p", "grep", {"a": 1, "b": 2})
    assert detector.observe("p", "grep", {"b": 2, "a": 1})  # same canonical arguments
    assert not detector.observe("q", "grep", {"a": 1, "b": 2})  # another persona
    detector.observe("p", "read_file", {})
    detector.observe("p", "list_dir", {})
    assert not detector.observe("p", "grep", {"a": 1, "b": 2})  # fell out of the window
    assert detector.detections == 1


@pytest.mark.parametrize(
    ("task", "level"),
    [
        ("Run the tests and verify the fix", InvolvementLevel.THOROUGH),
        ("Please test the parser", InvolvementLevel.THOROUGH),
        ("What does the config say?", InvolvementLevel.MINIMAL),
        ("Explain the build", InvolvementLevel.MINIMAL),
        ("Add a timeout setting", InvolvementLevel.STANDARD),
        ("Give me the port", InvolvementLevel.STANDARD),
    ],
)
def test_involvement_comes_from_the_task_type(task: str, level: InvolvementLevel) -> None:
    assert involvement_for(task) is level


def test_subtask_involvement_ignores_history() -> None:
    assert involvement_for_subtask("Add a setting", "Write it") is InvolvementLevel.STANDARD
    assert involvement_for_subtask("Add a setting", "Verify it") is InvolvementLevel.THOROUGH
    assert involvement_for_subtask("Verify the fix", "Read a file") is InvolvementLevel.THOROUGH


def _check(work: WorkerResult, tmp: Path | None = None, **kw: object) -> ValidationResult | None:
    return deterministic_checks(
        work,
        level=kw.get("level", InvolvementLevel.STANDARD),  # type: ignore[arg-type]
        required_tools=kw.get("required", []),  # type: ignore[arg-type]
        tools_available=frozenset({"read_file", "grep", "write_file"}),
        workspace=tmp,
    )


def test_deterministic_checks(tmp_path: Path) -> None:
    no_tools = WorkerResult(success=True, result="It is 8080.")
    guard = _check(no_tools)
    assert guard and guard.completion_signal.blocker_type is BlockerType.HALLUCINATION
    assert _check(no_tools, level=InvolvementLevel.MINIMAL) is None
    missing = _check(WORK, required=["read_file"])
    assert missing and "read_file" in missing.issues[0]
    (tmp_path / "real.txt").write_text("x")
    claims = WORK.model_copy(update={"result": "I created real.txt and wrote `ghost.md`."})
    claimed = _check(claims, tmp_path)
    assert claimed and claimed.issues == ["claimed files do not exist: ghost.md"]
    assert _check(WORK, tmp_path) is None
    numbers = WORK.model_copy(update={"result": "I added 0.5 seconds and wrote v2.0 notes."})
    assert _check(numbers, tmp_path) is None  # numbers are not file names
    unfinished = WORK.model_copy(update={"success": False, "error": "step budget of 3 used up"})
    partial = _check(unfinished)
    assert partial and partial.completion_signal.blocker_type is BlockerType.PARTIAL
    assert partial.completion_signal.progress_made is True
