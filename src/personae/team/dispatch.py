"""Strategy dispatch: what to do with unapproved work.

A pure function of the validation, the worker result and the subtask's own
budget state: :func:`next_step` returns the decision with the budget state after
it and changes nothing. The budget is per original subtask and never shared;
the session failure count is telemetry only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from personae.limits import DEFAULTS
from personae.team.signals import BlockerType, Strategy, ValidationResult, WorkerResult

__all__ = ["NextStep", "StepAction", "SubtaskBudget", "next_step"]

LOOP_SKIP_AFTER = 2
"""Loop detections on one subtask before it is skipped."""
TOOL_FAILURE_RETRIES = 2
"""At most this many retries for tool failures (within the retry budget)."""


class StepAction(StrEnum):
    """What the runner does next for a subtask."""

    ACCEPT = "accept"
    RETRY = "retry"
    REPHRASE = "rephrase"
    DECOMPOSE = "decompose"
    SKIP = "skip"
    ESCALATE = "escalate"
    CONTINUE = "continue"
    """Budget exhausted with progress: keep the partial work for synthesis (not validated)."""


@dataclass(frozen=True, kw_only=True)
class SubtaskBudget:
    """Retry state of one original subtask (reset for every new subtask)."""

    max_retries: int = DEFAULTS.max_retries
    """Corrections allowed."""
    retries_used: int = 0
    """Corrections spent."""
    loop_detections: int = 0
    """Loops seen on this subtask."""
    tool_failure_retries: int = 0
    """Retries spent on tool failures."""
    history: tuple[str, ...] = ()
    """Actions taken, in order."""

    @property
    def exhausted(self) -> bool:
        """No corrections left."""
        return self.retries_used >= self.max_retries


@dataclass(frozen=True, kw_only=True)
class NextStep:
    """The dispatch outcome."""

    action: StepAction
    """What to do."""
    blocker: BlockerType | None
    """The blocker it answers."""
    instruction: str = ""
    """Correction text for the next attempt (retry/rephrase/decompose)."""
    warning: str | None = None
    """User-visible warning (skip, escalate, exhaustion)."""
    budget: SubtaskBudget = field(default_factory=SubtaskBudget)
    """The subtask's budget state after this decision (use it for the next attempt)."""


def _tools_hint(tools: list[str]) -> str:
    return ", ".join(tools) if tools else "the tools available to you"


def _first_lines(text: str, limit: int = 300) -> str:
    flat = " ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def next_step(
    validation: ValidationResult,
    work: WorkerResult,
    budget: SubtaskBudget,
    *,
    subtask: str,
    tools_to_use: list[str],
    allowed_tools: list[str] | None = None,
    directive: str = "",
) -> NextStep:
    """Choose the next action; the decision carries the new budget state (retries spent,
    loops seen). Pure: ``budget`` is not changed.

    ``allowed_tools`` are the persona's tools (named in scope-drift corrections);
    ``directive`` is the turn's shared directive, quoted in corrections that ask
    the worker to stay in scope. The validator's own correction (written by its
    model call with the shared context) is appended to the fitted instruction.
    """
    if validation.approved:
        history = (*budget.history, StepAction.ACCEPT.value)
        return NextStep(
            action=StepAction.ACCEPT, blocker=None, budget=replace(budget, history=history)
        )
    signal = validation.completion_signal
    # A repeated call detected in code is a loop whatever the validator said.
    blocker = BlockerType.LOOP if work.loop_detected else signal.blocker_type
    if blocker is BlockerType.LOOP:
        budget = replace(budget, loop_detections=budget.loop_detections + 1)
    decision = _choose(
        validation, work=work, budget=budget, blocker=blocker, subtask=subtask,
        tools_to_use=tools_to_use, allowed_tools=allowed_tools, directive=directive,
    )  # fmt: skip
    if decision.instruction and validation.correction:
        decision = replace(
            decision,
            instruction=f"{decision.instruction}\nValidator: {validation.correction}",
        )
    if decision.action in (StepAction.RETRY, StepAction.REPHRASE, StepAction.DECOMPOSE):
        budget = replace(budget, retries_used=budget.retries_used + 1)
        if blocker is BlockerType.TOOL_FAILURE:
            budget = replace(budget, tool_failure_retries=budget.tool_failure_retries + 1)
    budget = replace(budget, history=(*budget.history, decision.action.value))
    return replace(decision, budget=budget)


def _choose(
    validation: ValidationResult,
    *,
    work: WorkerResult,
    budget: SubtaskBudget,
    blocker: BlockerType | None,
    subtask: str,
    tools_to_use: list[str],
    allowed_tools: list[str] | None,
    directive: str,
) -> NextStep:
    signal = validation.completion_signal
    issues = "; ".join(validation.issues) or "the work was not approved"
    # A loop is counted in next_step() before this.
    if blocker is BlockerType.LOOP and budget.loop_detections >= LOOP_SKIP_AFTER:
        return NextStep(
            action=StepAction.SKIP,
            blocker=blocker,
            warning=f"skipped {subtask!r}: the worker repeated the same action "
            f"({budget.loop_detections} loop detections)",
        )
    if blocker is BlockerType.CAPABILITY_GAP or (
        blocker is None and signal.suggested_strategy is Strategy.ESCALATE
    ):
        return NextStep(
            action=StepAction.ESCALATE,
            blocker=blocker,
            warning=f"needs you: {subtask!r} cannot be done with the available tools or "
            f"capabilities ({issues})",
        )
    if blocker is None and signal.suggested_strategy is Strategy.SKIP:
        return NextStep(
            action=StepAction.SKIP, blocker=None, warning=f"skipped {subtask!r}: {issues}"
        )
    tool_failures_left = budget.tool_failure_retries < TOOL_FAILURE_RETRIES
    if budget.exhausted or (blocker is BlockerType.TOOL_FAILURE and not tool_failures_left):
        if signal.progress_made:
            return NextStep(
                action=StepAction.CONTINUE,
                blocker=blocker,
                warning=f"retry budget used up for {subtask!r}; keeping its partial work "
                "(not validated) for the summary",
            )
        return NextStep(
            action=StepAction.SKIP,
            blocker=blocker,
            warning=f"skipped {subtask!r} after {budget.retries_used} retries with no "
            f"progress ({issues})",
        )
    if blocker is BlockerType.LOOP:
        return NextStep(
            action=StepAction.REPHRASE,
            blocker=blocker,
            instruction="You repeated a tool call you had already made. Use the earlier "
            "result instead of calling it again, and take a different next step.",
        )
    if blocker is BlockerType.HALLUCINATION:
        return NextStep(
            action=StepAction.RETRY,
            blocker=blocker,
            instruction=f"Your previous answer claimed work no tool output supports ({issues}). "
            f"Do the work with these tools and report only what their output shows: "
            f"{_tools_hint(tools_to_use)}.",
        )
    if blocker is BlockerType.TOOL_FAILURE:
        errors = "; ".join(f"{c.tool}: {c.result}" for c in work.failed_tools) or issues
        return NextStep(
            action=StepAction.REPHRASE if budget.tool_failure_retries else StepAction.RETRY,
            blocker=blocker,
            instruction=f"A tool failed: {errors}. Fix the arguments or take another route.",
        )
    if blocker is BlockerType.PARTIAL:
        return NextStep(
            action=StepAction.DECOMPOSE,
            blocker=blocker,
            instruction=f"Split into smaller steps; still missing: {issues}",
        )
    if blocker is BlockerType.SCOPE_DRIFT:
        refused = sorted({c.tool for c in work.failed_tools if c.refused})
        parts = [f"Stay strictly within this subtask: {subtask}. Do nothing else. ({issues})"]
        if refused:
            parts.append(f"Do not call {', '.join(refused)}: this persona may not use it.")
        if allowed_tools is not None:
            parts.append(f"Use only these tools: {_tools_hint(sorted(allowed_tools))}.")
        if directive.strip():
            parts.append(f"The directive still applies: {_first_lines(directive)}")
        return NextStep(action=StepAction.REPHRASE, blocker=blocker, instruction=" ".join(parts))
    return NextStep(
        action=StepAction.RETRY,
        blocker=blocker,
        instruction=f"The work was not accepted: {issues}. Address these points.",
    )
